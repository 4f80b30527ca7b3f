"""One delivery attempt: the subscription's current sink and settings, its rate limit, the
protocol's sender, and the outcome handed on (confirmed, failed, or the subscription is gone).
A delivery whose sink's circuit is open (and that is not its probe) is let go unsent: it stays
in the log as it was.

An attempt never raises. If recording its outcome fails (the log is unwritable?) the row is
still in the log: the attempt frees its slot and has the loader pick it up again a little later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ceprotocols.errors import DeliveryError
from ceprotocols.sender import Destination, ReplyingSender
from ceprotocols.tracecontext import TraceContext
from opentelemetry import trace

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.completions import Completions, Release
from cebroker.pipeline.dispatch.failures import Failures, Schedule
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.replies import HopLimit, Replies, wants_replies
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.dispatch.transforming import Transformer
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.senders import SenderPool
from cebroker.storage.claims import Claims
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

log = logging.getLogger("cebroker.pipeline")

#: Seconds before a delivery whose outcome could not be recorded is loaded from the log again.
RELOAD_DELAY = 5.0


async def let_go(
    claims: Claims | None, lane: Lane, items: Sequence[Item], release: Release, schedule: Schedule
) -> None:
    """Let ``items`` go unsent while their sink's circuit is open: the rows stay in the log as
    they were (``claims`` given back, on a shared log), their lane slots are freed, and the
    loader takes them again once the circuit closes."""
    if claims is not None:
        await claims.release([item.row for item in items])
    schedule(lane.id, 0.0)
    for item in items:
        release(lane, item.row.id)


def sender_error(exc: Exception, protocol: str) -> DeliveryError:
    """What a sender raised, as a delivery error (call it in the ``except`` block): a sender bug
    must not kill the lane, so anything else is logged with its traceback and is transient."""
    if isinstance(exc, DeliveryError):
        return exc
    log.exception("sender for %s raised an unexpected error", protocol)
    return DeliveryError(f"sender error: {exc!r}")


class Attempts:
    """Delivers items of lanes through the senders and hands on each outcome."""

    def __init__(
        self,
        *,
        senders: SenderPool,
        subscriptions: Mapping[str, Subscription],
        metrics: PipelineMetrics,
        clock: Clock,
        completions: Completions,
        failures: Failures,
        circuits: Circuits,
        release: Release,
        schedule: Schedule,
        transformer: Transformer,
        setups: DeliverySetups,
        tracing: Tracing = NO_TRACING,
        replies: Replies | None = None,
        claims: Claims | None = None,
    ) -> None:
        self._setups = setups
        self._tracing = tracing
        self._replies = replies
        self._claims = claims
        self._senders = senders
        self._transformer = transformer
        self._circuits = circuits
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._clock = clock
        self._completions = completions
        self._failures = failures
        self._release = release
        self._schedule = schedule

    async def run(self, lane: Lane, item: Item) -> None:
        """Deliver ``item`` once and record the outcome."""
        try:
            await self._attempt(lane, item)
        except Exception:
            log_failure("delivery %s: recording its outcome failed", item.row.id)
            self._release(lane, item.row.id)
            self._schedule(lane.id, self._clock.now() + RELOAD_DELAY)

    async def _attempt(self, lane: Lane, item: Item) -> None:
        subscription = self._subscriptions.get(lane.id)
        if subscription is None:
            self._completions.dropped(lane, item)
            return
        if self._claims is not None and not self._claims.holds(item.row):
            # A shared log's claim lapsed (this instance could not renew its lease in time):
            # another instance may deliver it now. Leave it; the loader claims it again if not.
            self._release(lane, item.row.id)
            self._schedule(lane.id, self._clock.now() + RELOAD_DELAY)
            return
        if not self._circuits.admits(lane.id, item.row.id):
            await let_go(self._claims, lane, [item], self._release, self._schedule)
            return
        setup = self._setups.of(subscription)
        policy, destination = setup.policy, setup.destination
        prepared = await self._transformer.apply(lane, item, subscription, policy, destination)
        if prepared is None:  # the transformation dropped it or failed: settled already
            return
        event, destination = prepared
        if lane.limiter is not None:
            await lane.limiter.acquire()
        if self._tracing.enabled:
            await self._traced(lane, item, event, subscription, policy, destination)
            return
        try:
            problem = await self._send(lane, item, subscription, event, destination, None)
        except Exception as exc:
            await self._failures.failed(lane, item, policy, sender_error(exc, subscription.protocol))
        else:
            await self._settle(lane, item, policy, problem)

    async def _send(
        self,
        lane: Lane,
        item: Item,
        subscription: Subscription,
        event: Mapping[str, Any],
        destination: Destination,
        context: TraceContext | None,
    ) -> HopLimit | DeliveryError | None:
        """Send ``event``; with ``config.reply: publish``, publish the sink's reply before the
        delivery may count as done (a crash in between retries the delivery). Raises what the
        sender raises; returns what keeps the delivery from being done: the reply's chain is too
        long, or the reply could not be committed (None: done)."""
        sender = self._senders.get(subscription.protocol)
        replies = self._replies
        if replies is None or not wants_replies(subscription) or not isinstance(sender, ReplyingSender):
            await sender.deliver(event, destination, trace=context)
            return None
        reply = await sender.deliver_replying(event, destination, limit=replies.limit, trace=context)
        await self._circuits.answered(lane.id)  # the sink answered, whatever its reply
        try:
            await replies.publish(subscription, [item.event], reply)
        except (HopLimit, DeliveryError) as exc:
            return exc
        return None

    async def _settle(
        self, lane: Lane, item: Item, policy: DeliveryPolicy, problem: HopLimit | DeliveryError | None
    ) -> None:
        """Record a delivery the sink confirmed: done, or held back by its reply (a dead letter
        past the hop limit; a retry, not counted toward the sink's circuit, when the reply
        could not be committed)."""
        if problem is None:
            await self._delivered(lane, item)
        elif isinstance(problem, HopLimit):
            await self._failures.give_up(
                lane, item, policy, GiveUp(item.row.attempts + 1, str(problem), None, None)
            )
        else:
            await self._failures.failed(lane, item, policy, problem, circuit_open=False)

    async def _delivered(self, lane: Lane, item: Item) -> None:
        delivered, latency = self._metrics.delivered(lane.id)
        delivered.inc()
        now = self._clock.now()
        self._metrics.last_delivered[lane.id] = now
        latency.observe(max(0.0, now - item.row.first_at))
        self._completions.delivered(lane, item)
        await self._circuits.answered(lane.id)

    async def _traced(
        self,
        lane: Lane,
        item: Item,
        event: Mapping[str, Any],
        subscription: Subscription,
        policy: DeliveryPolicy,
        destination: Destination,
    ) -> None:
        """:meth:`_attempt`'s send of ``event`` (the delivery, transformed) and its outcome in an
        attempt span, whose context the sink gets."""
        row = item.row
        span, context = self._tracing.attempt(
            stored=row.trace,
            protocol=subscription.protocol,
            sink=subscription.sink,
            subscription=lane.id,
            tenant=subscription.tenant,
            attempt=row.attempts + 1,
            event_id=str(item.event.get("id")),
            circuit="closed" if self._circuits.closed(lane.id) else "half_open",
            replay=row.replay,
        )
        with trace.use_span(span, end_on_exit=False):
            try:
                problem = await self._send(lane, item, subscription, event, destination, context)
            except Exception as exc:
                error = sender_error(exc, subscription.protocol)
                outcome = "unrecorded"  # the outcome's write failed: the loader takes it again
                try:
                    outcome = await self._failures.failed(lane, item, policy, error)
                finally:
                    circuit = "closed" if self._circuits.closed(lane.id) else "open"
                    Tracing.attempted(span, outcome, status=error.status, error=error, circuit=circuit)
                return
        Tracing.attempted(span, "delivered")
        await self._settle(lane, item, policy, problem)
