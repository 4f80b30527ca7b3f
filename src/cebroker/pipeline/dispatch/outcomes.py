"""What happens after an attempt: the one place an attempt's outcome is made durable.

An attempt (:mod:`.attempts`, :mod:`.batches`) and the transformation it applies
(:mod:`.transforming`) record nothing themselves: each returns an outcome, and
:meth:`Settler.apply` acts on it.

* :class:`Delivered`: the sink confirmed it. Counted, removed from the log (:mod:`.completions`),
  and the sink's circuit hears that the sink answered.
* :class:`Skipped`: the transformation dropped it. Removed from the log as done, counted
  ``dropped``.
* :class:`Gone`: its subscription was deleted. Removed from the log, not counted.
* :class:`Failed`: the attempt failed. The failure is counted toward the sink's circuit
  (:mod:`.circuits`) first, unless the attempt counted it already (a batch is one failed request
  of its sink); then :func:`~.retry.decide` says what follows: a retry is written to the log with
  its due time and handed to the loader; a delivery given up on becomes a dead letter with its
  reason, and a copy goes to the dead-letter sink, if any.
* :class:`DeadLetter`: a dead letter at once (a failed transformation, a reply past the hop
  limit): no retry, nothing counted toward the sink's circuit.
* :class:`LetGo`: its sink's circuit is open and it is not the probe. Sent nowhere, it stays in
  the log as it was (a shared log's claim is given back); the loader takes it again once the
  circuit closes.

Either way the delivery's lane slot is freed only after the log write has committed. When
recording an outcome fails (the log is unwritable?) the row is still in the log:
:meth:`Settler.reload` frees the slot and has the loader pick it up again a little later.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import orjson
from ceprotocols.errors import DeliveryError

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.completions import Completions, Release
from cebroker.pipeline.dispatch.deadletters import DeadLetterForwarder
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.retry import GiveUp, Retry, decide
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.storage.claims import Claims
from cebroker.storage.outcomes import Outcomes
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

log = logging.getLogger("cebroker.pipeline")

#: Tells the loader that a delivery of a subscription waits in the log until a given time.
Schedule = Callable[[str, float], None]

#: Seconds before a delivery whose outcome could not be recorded is loaded from the log again.
RELOAD_DELAY = 5.0


@dataclass(frozen=True, slots=True)
class Delivered:
    """The sink confirmed the delivery."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """The subscription's transformation dropped the delivery: done, nothing sent."""


@dataclass(frozen=True, slots=True)
class Gone:
    """The delivery's subscription was deleted."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed with ``error`` under ``policy``.

    ``circuit_open``: the sink's circuit after this failure when the attempt counted it already
    (None: count it when the outcome is applied). ``at``: when the retry is due, when the
    attempt decided it (the deliveries of a failed batch are retried together)."""

    policy: DeliveryPolicy
    error: DeliveryError
    circuit_open: bool | None = None
    at: float | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Make the delivery a dead letter at once, as ``give_up`` says."""

    policy: DeliveryPolicy
    give_up: GiveUp


@dataclass(frozen=True, slots=True)
class LetGo:
    """The sink's circuit is open and the delivery is not its probe: it stays in the log."""


#: What an attempt can come to.
Outcome = Delivered | Skipped | Gone | Failed | DeadLetter | LetGo

DELIVERED = Delivered()
SKIPPED = Skipped()
GONE = Gone()
LET_GO = LetGo()


class Settler:
    """Settles the outcomes of attempts (the log's :class:`~cebroker.storage.outcomes.Outcomes`
    records them); see the module docstring. ``claims``: a shared log's,
    through which a delivery let go is given back."""

    def __init__(
        self,
        *,
        journal: Outcomes,
        subscriptions: Mapping[str, Subscription],
        metrics: PipelineMetrics,
        clock: Clock,
        backlog: Backlog,
        completions: Completions,
        forwarder: DeadLetterForwarder,
        circuits: Circuits,
        release: Release,
        schedule: Schedule,
        uniform: Callable[[float, float], float] = random.uniform,
        tracing: Tracing = NO_TRACING,
        claims: Claims | None = None,
    ) -> None:
        self._tracing = tracing
        self._log = journal
        self._claims = claims
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._clock = clock
        self._backlog = backlog
        self._completions = completions
        self._forwarder = forwarder
        self._circuits = circuits
        self._release = release
        self._schedule = schedule
        self._uniform = uniform

    async def apply(self, lane: Lane, item: Item, outcome: Outcome) -> str:
        """Act on ``outcome`` of an attempt of ``item``; what it came to, as attempt spans name
        it: ``delivered``, ``dropped`` (transformed away, or its subscription is gone),
        ``retry``, ``deadlettered`` or ``letgo``."""
        match outcome:
            case Delivered():
                await self.delivered(lane, [item])
                return "delivered"
            case Skipped():
                self._metrics.deliveries.labels(self._metrics.label(lane.id), "dropped").inc()
                self._completions.delivered(lane, item, confirmed=False)
                return "dropped"
            case Gone():
                self._completions.dropped(lane, item)
                return "dropped"
            case Failed():
                return await self._failed(lane, item, outcome)
            case DeadLetter():
                return await self._dead_letter(lane, item, outcome.policy, outcome.give_up)
            case LetGo():
                await self.let_go(lane, [item])
                return "letgo"

    async def delivered(self, lane: Lane, items: Sequence[Item]) -> None:
        """The sink confirmed ``items`` (one request): counted, removed from the log, and the
        sink's circuit hears it answered."""
        self.confirmed(lane, items)
        if self._circuits.counting(lane.id):
            await self._circuits.answered(lane.id)

    def confirmed(self, lane: Lane, items: Sequence[Item]) -> None:
        """:meth:`delivered` but for the circuit, whose :meth:`~.circuits.Circuits.answered` the
        caller awaits when it is :meth:`~.circuits.Circuits.counting` (most deliveries then need
        no coroutine of their own). Each latency is observed now; the ``delivered`` count grows
        once the removal is written (:mod:`.completions`: one update per write, not per delivery)."""
        latency = self._metrics.latency_of(lane.id)
        now = self._clock.now()
        self._metrics.last_delivered[lane.id] = now
        for item in items:
            latency.observe(max(0.0, now - item.row.first_at))
            self._completions.delivered(lane, item)

    async def let_go(self, lane: Lane, items: Sequence[Item]) -> None:
        """Let ``items`` go unsent while their sink's circuit is open: the rows stay in the log
        as they were (``claims`` given back, on a shared log), their lane slots are freed, and
        the loader takes them again once the circuit closes."""
        if self._claims is not None:
            await self._claims.release([item.row for item in items])
        self._schedule(lane.id, 0.0)
        for item in items:
            self._release(lane, item.row.id)

    def reload(self, lane: Lane, items: Sequence[Item], *, held_only: bool = False) -> None:
        """Recording the outcome of ``items`` failed, or a shared log's claim on them lapsed:
        their rows are in the log, so free their slots (``held_only``: those still in flight)
        and have the loader take them again a little later."""
        for item in items:
            if not held_only or item.row.id in lane.inflight:
                self._release(lane, item.row.id)
        self._schedule(lane.id, self._clock.now() + RELOAD_DELAY)

    async def batch_failed(
        self, lane: Lane, items: Sequence[Item], policy: DeliveryPolicy, error: DeliveryError
    ) -> None:
        """The request carrying the batch ``items`` failed with ``error``: one failed attempt
        of the sink, counted once (with the head as the attempt: a probe is a batch of one),
        and a failed attempt of each delivery, all retried together at the time
        :func:`~.retry.decide` gives the head."""
        head = items[0].row
        circuit_open = await self._circuits.failed(lane.id, head.id, policy, error)
        first = decide(
            policy,
            head.attempts,
            error,
            first_at=head.first_at,
            now=self._clock.now(),
            circuit_open=circuit_open,
        )
        at = first.next_at if isinstance(first, Retry) else None
        outcome = Failed(policy, error, circuit_open=circuit_open, at=at)
        retried: list[tuple[int, float]] = []
        recorded = await asyncio.gather(
            *(self._failed(lane, item, outcome, retried) for item in items), return_exceptions=True
        )
        # The retries are freed and announced once all of them are written: one written before
        # the others, and already due (a short backoff), would be claimed alone, and the batch
        # retried in parts.
        for row_id, next_at in retried:
            self._release(lane, row_id)
            self._schedule(lane.id, next_at)
        lost = [
            item for item, result in zip(items, recorded, strict=True) if isinstance(result, BaseException)
        ]
        if lost:
            log.debug("a batch: recording %d failed deliveries failed; they are loaded again", len(lost))
            self.reload(lane, lost, held_only=True)

    async def _failed(
        self, lane: Lane, item: Item, failed: Failed, retried: list[tuple[int, float]] | None = None
    ) -> str:
        """Count the failure toward the sink's circuit (unless counted), then reschedule the
        delivery or make it a dead letter, as :func:`~.retry.decide` says. With ``retried``, a
        rescheduled delivery's place is not freed nor its retry announced: its id and retry time
        are added to it, for the caller to do so."""
        if lane.id not in self._subscriptions:  # deleted during the attempt: nothing to keep
            self._completions.dropped(lane, item)
            return "dropped"
        row = item.row
        circuit_open = failed.circuit_open
        if circuit_open is None:
            circuit_open = await self._circuits.failed(lane.id, row.id, failed.policy, failed.error)
        outcome = decide(
            failed.policy,
            row.attempts,
            failed.error,
            first_at=row.first_at,
            now=self._clock.now(),
            uniform=self._uniform,
            circuit_open=circuit_open,
        )
        label = self._metrics.label(lane.id)
        if isinstance(outcome, Retry):
            self._metrics.deliveries.labels(label, "retry").inc()
            self._metrics.retries.labels(label).inc()
            next_at = outcome.next_at if failed.at is None else failed.at
            await self._log.reschedule(row, outcome.attempts, next_at, outcome.error)
            if retried is not None:
                retried.append((row.id, next_at))
            else:
                self._release(lane, row.id)
                self._schedule(lane.id, next_at)
            return "retry"
        return await self._dead_letter(lane, item, failed.policy, outcome)

    async def _dead_letter(self, lane: Lane, item: Item, policy: DeliveryPolicy, outcome: GiveUp) -> str:
        """Make ``item`` a dead letter with ``outcome``'s reason; it keeps the stored event."""
        row = item.row
        label = self._metrics.label(lane.id)
        self._metrics.deliveries.labels(label, "deadlettered").inc()
        self._metrics.dead_letters.labels(label).inc()
        await self._log.dead_letter(
            row, orjson.dumps(item.event), outcome.attempts, outcome.reason, outcome.status, outcome.body
        )
        self._release(lane, row.id)
        self._backlog.settled(1)
        self._forwarder.forward(item.event, row.subscription, policy, outcome)
        if self._tracing.enabled:  # under the attempt span, which is the current one
            self._tracing.dead_letter(
                None, subscription=row.subscription, attempts=outcome.attempts, reason=outcome.reason
            )
        return "deadlettered"
