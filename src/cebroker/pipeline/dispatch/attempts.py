"""One delivery attempt: the subscription's current sink and settings, its rate limit, the
protocol's sender, and the outcome (:mod:`.outcomes`: confirmed, failed, a dead letter, or the
subscription is gone) handed to the one place that acts on it. A delivery whose sink's circuit
is open (and that is not its probe) is let go unsent: it stays in the log as it was.

An attempt never raises. If recording its outcome fails (the log is unwritable?) the row is
still in the log: the attempt frees its slot and has the loader pick it up again a little later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ceprotocols.errors import DeliveryError
from ceprotocols.sender import Destination, ReplyingSender
from ceprotocols.tracecontext import TraceContext
from opentelemetry import trace

from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.outcomes import DELIVERED, GONE, LET_GO, DeadLetter, Failed, Outcome, Settler
from cebroker.pipeline.dispatch.replies import HopLimit, Replies, wants_replies
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.dispatch.transforming import Transformer
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.senders import SenderPool
from cebroker.storage.claims import Claims
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

log = logging.getLogger("cebroker.pipeline")


def sender_error(exc: Exception, protocol: str) -> DeliveryError:
    """What a sender raised, as a delivery error (call it in the ``except`` block): a sender bug
    must not kill the lane, so anything else is logged with its traceback and is transient."""
    if isinstance(exc, DeliveryError):
        return exc
    log.exception("sender for %s raised an unexpected error", protocol)
    return DeliveryError(f"sender error: {exc!r}")


class Attempts:
    """Delivers items of lanes through the senders; each attempt's outcome goes to
    :class:`~.outcomes.Settler`."""

    def __init__(
        self,
        *,
        senders: SenderPool,
        subscriptions: Mapping[str, Subscription],
        circuits: Circuits,
        settler: Settler,
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
        self._settler = settler

    async def run(self, lane: Lane, item: Item) -> None:
        """Deliver ``item`` once and record the outcome."""
        # One coroutine for the whole attempt (no frame of its own for each step): every
        # resumption of every delivery passes through each frame of the chain.
        try:
            subscription = self._subscriptions.get(lane.id)
            if subscription is None:
                await self._settler.apply(lane, item, GONE)
                return
            if self._claims is not None and not self._claims.holds(item.row):
                # A shared log's claim lapsed (this instance could not renew its lease in time):
                # another instance may deliver it now. Leave it; the loader claims it again if not.
                self._settler.reload(lane, [item])
                return
            if not self._circuits.admits(lane.id, item.row.id):
                await self._settler.apply(lane, item, LET_GO)
                return
            setup = self._setups.of(subscription)
            policy = setup.policy
            prepared = self._transformer.apply(lane, item, subscription, policy, setup.destination)
            if not isinstance(prepared, tuple):  # the transformation dropped it or failed
                await self._settler.apply(lane, item, prepared)
                return
            event, destination = prepared
            if lane.limiter is not None:
                await lane.limiter.acquire()
            if self._tracing.enabled:
                await self._traced(lane, item, event, subscription, policy, destination)
                return
            replies = self._replies
            if replies is not None and wants_replies(subscription):
                outcome = await self._send(lane, item, subscription, event, destination, policy, None)
                await self._settler.apply(lane, item, outcome)
                return
            # The plain send (``_send`` without replies) inlined, and a confirmed delivery
            # settled without a coroutine of its own: every resumption of the exchange passes
            # through each frame between the lane's worker and the sender.
            try:
                await self._senders.get(subscription.protocol).deliver(event, destination, trace=None)
            except Exception as exc:
                failed = Failed(policy, sender_error(exc, subscription.protocol))
                await self._settler.apply(lane, item, failed)
                return
            self._settler.confirmed(lane, (item,))
            if self._circuits.counting(lane.id):
                await self._circuits.answered(lane.id)
        except Exception:
            log_failure("delivery %s: recording its outcome failed", item.row.id)
            self._settler.reload(lane, [item])

    async def _send(
        self,
        lane: Lane,
        item: Item,
        subscription: Subscription,
        event: Mapping[str, Any],
        destination: Destination,
        policy: DeliveryPolicy,
        context: TraceContext | None,
    ) -> Outcome:
        """Send ``event`` and say what came of it: delivered; failed (what the sender raised,
        to be counted toward the sink's circuit); or, when the sink's reply is published, a
        dead letter (the reply's chain is too long) or a retry not counted toward the circuit
        (the reply could not be committed)."""
        try:
            sender = self._senders.get(subscription.protocol)
            replies = self._replies
            if replies is None or not wants_replies(subscription) or not isinstance(sender, ReplyingSender):
                await sender.deliver(event, destination, trace=context)
                return DELIVERED
            problem = await self._replying(
                lane, item, subscription, sender, replies, event, destination, context
            )
        except Exception as exc:
            return Failed(policy, sender_error(exc, subscription.protocol))
        if problem is None:
            return DELIVERED
        if isinstance(problem, HopLimit):
            return DeadLetter(policy, GiveUp(item.row.attempts + 1, str(problem), None, None))
        return Failed(policy, problem, circuit_open=False)

    async def _replying(
        self,
        lane: Lane,
        item: Item,
        subscription: Subscription,
        sender: ReplyingSender,
        replies: Replies,
        event: Mapping[str, Any],
        destination: Destination,
        context: TraceContext | None,
    ) -> HopLimit | DeliveryError | None:
        """Send ``event`` of a subscription with ``config.reply: publish`` and publish the
        sink's reply before the delivery may count as done (a crash in between retries the
        delivery). Raises what the sender raises; returns what keeps the delivery from being
        done: the reply's chain is too long, or the reply could not be committed (None: done)."""
        reply = await sender.deliver_replying(event, destination, limit=replies.limit, trace=context)
        await self._circuits.answered(lane.id)  # the sink answered, whatever its reply
        try:
            await replies.publish(subscription, [item.event], reply)
        except (HopLimit, DeliveryError) as exc:
            return exc
        return None

    async def _traced(
        self,
        lane: Lane,
        item: Item,
        event: Mapping[str, Any],
        subscription: Subscription,
        policy: DeliveryPolicy,
        destination: Destination,
    ) -> None:
        """:meth:`run`'s send of ``event`` (the delivery, transformed) and its outcome in an
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
            outcome = await self._send(lane, item, subscription, event, destination, policy, context)
            if isinstance(outcome, Failed) and outcome.circuit_open is None:  # the sender failed
                error = outcome.error
                recorded = "unrecorded"  # the outcome's write failed: the loader takes it again
                try:
                    recorded = await self._settler.apply(lane, item, outcome)
                finally:
                    circuit = "closed" if self._circuits.closed(lane.id) else "open"
                    Tracing.attempted(span, recorded, status=error.status, error=error, circuit=circuit)
                return
        Tracing.attempted(span, "delivered")
        await self._settler.apply(lane, item, outcome)
