"""One attempt of a batch: several deliveries of a batching lane sent in one request.

The sink's answer settles every delivery of the batch alike: a 2xx confirms them all; a failure
is each delivery's failed attempt, with one retry time for all of them (the batch is retried
whole, as :func:`~.retry.decide` says for its first delivery), and a delivery that is out of
attempts or time becomes a dead letter on its own, with the reason.

The sink's circuit (:mod:`~.circuits`) sees a batch as its deliveries: while it is open only the
probe goes (a batch of one), the others stay in the log; a confirmed batch closes it, and a
failed one counts as one failed attempt of the sink (a request that failed, whatever it held).

Like a single attempt, a batch attempt never raises: a delivery whose outcome could not be
recorded is still in the log, and the loader picks it up again a little later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ceprotocols.errors import DeliveryError, DeliveryRejected
from ceprotocols.sender import BatchSender, Destination, ReplyingSender
from ceprotocols.tracecontext import TraceContext
from opentelemetry import trace

from cebroker.pipeline.dispatch.attempts import sender_error
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.outcomes import GONE, DeadLetter, Failed, Outcome, Settler
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


class BatchAttempts:
    """Delivers batches of lanes through the senders; each delivery's outcome goes to
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
        self._circuits = circuits
        self._transformer = transformer
        self._senders = senders
        self._subscriptions = subscriptions
        self._settler = settler

    async def run(self, lane: Lane, items: list[Item]) -> None:
        """Deliver ``items`` in one request and record every outcome."""
        try:
            await self._attempt(lane, items)
        except Exception:
            log_failure("a batch of %d deliveries: recording the outcome failed", len(items))
            self._settler.reload(lane, items, held_only=True)

    async def _attempt(self, lane: Lane, items: list[Item]) -> None:
        subscription = self._subscriptions.get(lane.id)
        if subscription is None:
            for item in items:
                await self._settler.apply(lane, item, GONE)
            return
        held = [item for item in items if self._claims is None or self._claims.holds(item.row)]
        if len(held) < len(items):  # a lapsed claim (see Attempts): leave those to the log
            self._settler.reload(lane, [item for item in items if item not in held], held_only=True)
        if not held:
            return
        admitted = [item for item in held if self._circuits.admits(lane.id, item.row.id)]
        if len(admitted) < len(held):  # only the probe goes while the circuit is open
            await self._settler.let_go(lane, [item for item in held if item not in admitted])
            held = admitted
        if not held:
            return
        setup = self._setups.of(subscription)
        policy = setup.policy
        # Each delivery transformed on its own: those dropped or failed are settled as such,
        # the rest go out together (a batch carries no per-event $delivery).
        events = []
        sent = []
        for item in held:
            prepared = self._transformer.apply(
                lane, item, subscription, policy, setup.destination, batch=True
            )
            if isinstance(prepared, tuple):
                events.append(prepared[0])
                sent.append(item)
            else:
                await self._settler.apply(lane, item, prepared)
        held = sent
        if not held:
            return
        if lane.limiter is not None:  # the rate limit counts deliveries, batched or not
            for _ in held:
                await lane.limiter.acquire()
        if self._tracing.enabled:
            await self._traced(lane, held, events, subscription, policy, setup.destination)
            return
        try:
            problem = await self._send(lane, held, subscription, events, setup.destination, None)
        except Exception as exc:
            await self._settler.batch_failed(lane, held, policy, sender_error(exc, subscription.protocol))
        else:
            await self._settle(lane, held, policy, problem)

    async def _send(
        self,
        lane: Lane,
        held: list[Item],
        subscription: Subscription,
        events: list[Mapping[str, Any]],
        destination: Destination,
        context: TraceContext | None,
    ) -> HopLimit | DeliveryError | None:
        """Send the batch; with ``config.reply: publish``, publish the sink's answer before the
        deliveries may count as done (see :meth:`.attempts.Attempts._replying`)."""
        sender = self._senders.get(subscription.protocol)
        if not isinstance(sender, BatchSender):
            raise DeliveryRejected(f"{subscription.protocol} deliveries cannot be batched", retryable=False)
        replies = self._replies
        if replies is None or not wants_replies(subscription) or not isinstance(sender, ReplyingSender):
            await sender.deliver_batch(events, destination, trace=context)
            return None
        reply = await sender.deliver_batch_replying(events, destination, limit=replies.limit, trace=context)
        await self._circuits.answered(lane.id)  # the sink answered, whatever its reply
        try:
            await replies.publish(subscription, [item.event for item in held], reply)
        except (HopLimit, DeliveryError) as exc:
            return exc
        return None

    async def _settle(
        self, lane: Lane, held: list[Item], policy: DeliveryPolicy, problem: HopLimit | DeliveryError | None
    ) -> None:
        """Record a batch the sink confirmed: done, or held back by its reply (dead letters past
        the hop limit; retries, not counted toward the sink's circuit, when the reply could not
        be committed)."""
        if problem is None:
            await self._settler.delivered(lane, held)
            return
        for item in held:
            outcome: Outcome
            if isinstance(problem, HopLimit):
                outcome = DeadLetter(policy, GiveUp(item.row.attempts + 1, str(problem), None, None))
            else:
                outcome = Failed(policy, problem, circuit_open=False)
            await self._settler.apply(lane, item, outcome)

    async def _traced(
        self,
        lane: Lane,
        held: list[Item],
        events: list[Mapping[str, Any]],
        subscription: Subscription,
        policy: DeliveryPolicy,
        destination: Destination,
    ) -> None:
        """:meth:`_attempt`'s send of ``events`` (``held``, transformed) and its outcomes in one
        attempt span for the batch."""
        head = held[0].row
        span, context = self._tracing.attempt(
            stored=head.trace,
            protocol=subscription.protocol,
            sink=subscription.sink,
            subscription=lane.id,
            tenant=subscription.tenant,
            attempt=head.attempts + 1,
            event_id=None,
            circuit="closed" if self._circuits.closed(lane.id) else "half_open",
            replay=head.replay,
            others=[item.row.trace for item in held[1:]],
        )
        with trace.use_span(span, end_on_exit=False):
            try:
                problem = await self._send(lane, held, subscription, events, destination, context)
            except Exception as exc:
                error = sender_error(exc, subscription.protocol)
                try:
                    await self._settler.batch_failed(lane, held, policy, error)
                finally:
                    circuit = "closed" if self._circuits.closed(lane.id) else "open"
                    Tracing.attempted(span, "failed", status=error.status, error=error, circuit=circuit)
                return
        Tracing.attempted(span, "delivered")
        await self._settle(lane, held, policy, problem)
