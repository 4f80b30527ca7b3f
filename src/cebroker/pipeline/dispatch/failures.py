"""Acting on a failed attempt: the :func:`~.retry.decide` outcome made durable.

The failure is counted toward the sink's circuit first (:mod:`~.circuits`). A retry is written to
the log with its due time and handed to the loader; a delivery given up on becomes a dead letter
with its reason (and a copy goes to the dead-letter sink, if any).
Either way the delivery's lane slot is freed only after the log write has committed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

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
from cebroker.storage.outcomes import Outcomes
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

#: Tells the loader that a delivery of a subscription waits in the log until a given time.
Schedule = Callable[[str, float], None]


class Failures:
    """Records failed attempts as retries or dead letters."""

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
    ) -> None:
        self._tracing = tracing
        self._log = journal
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

    async def failed(
        self,
        lane: Lane,
        item: Item,
        policy: DeliveryPolicy,
        error: DeliveryError,
        *,
        at: float | None = None,
        circuit_open: bool | None = None,
    ) -> str:
        """Record that delivering ``item`` failed with ``error`` under ``policy``; a retry is
        due at ``at`` when given (the items of a failed batch are retried together).
        ``circuit_open``: the sink's circuit after this failure, when the caller counted it
        already (a failed batch is one failed attempt of its sink); by default it is counted here.
        Returns the outcome: ``retry``, ``deadlettered`` or ``dropped`` (the subscription is gone)."""
        if lane.id not in self._subscriptions:  # deleted during the attempt: nothing to keep
            self._completions.dropped(lane, item)
            return "dropped"
        row = item.row
        if circuit_open is None:
            circuit_open = await self._circuits.failed(lane.id, row.id, policy, error)
        outcome = decide(
            policy,
            row.attempts,
            error,
            first_at=row.first_at,
            now=self._clock.now(),
            uniform=self._uniform,
            circuit_open=circuit_open,
        )
        label = self._metrics.label(lane.id)
        if isinstance(outcome, Retry):
            self._metrics.deliveries.labels(label, "retry").inc()
            self._metrics.retries.labels(label).inc()
            next_at = outcome.next_at if at is None else at
            await self._log.reschedule(row, outcome.attempts, next_at, outcome.error)
            self._release(lane, row.id)
            self._schedule(lane.id, next_at)
            return "retry"
        return await self.give_up(lane, item, policy, outcome)

    async def give_up(self, lane: Lane, item: Item, policy: DeliveryPolicy, outcome: GiveUp) -> str:
        """Make ``item`` a dead letter with ``outcome``'s reason, at once: no retry, and nothing
        counted toward the sink's circuit (a failed transformation is about the event, not the
        sink). The dead letter keeps the stored event. Returns ``deadlettered``."""
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
