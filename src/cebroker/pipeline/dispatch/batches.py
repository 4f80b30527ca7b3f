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

import asyncio
import logging
from collections.abc import Mapping

from ceprotocols.errors import DeliveryError, DeliveryRejected
from ceprotocols.sender import BatchSender, ReplyingSender

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.attempts import RELOAD_DELAY, let_go
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.completions import Completions, Release
from cebroker.pipeline.dispatch.failures import Failures, Schedule
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.replies import HopLimit, Replies, wants_replies
from cebroker.pipeline.dispatch.retry import GiveUp, Retry, decide
from cebroker.pipeline.dispatch.transforming import Transformer
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.senders import SenderPool
from cebroker.storage.deliveries import DeliveryLog
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")


class BatchAttempts:
    """Delivers batches of lanes through the senders and hands on each delivery's outcome."""

    def __init__(
        self,
        *,
        journal: DeliveryLog,
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
        replies: Replies | None = None,
    ) -> None:
        self._replies = replies
        self._log = journal
        self._circuits = circuits
        self._transformer = transformer
        self._senders = senders
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._clock = clock
        self._completions = completions
        self._failures = failures
        self._release = release
        self._schedule = schedule

    async def run(self, lane: Lane, items: list[Item]) -> None:
        """Deliver ``items`` in one request and record every outcome."""
        try:
            await self._attempt(lane, items)
        except Exception:
            log_failure("a batch of %d deliveries: recording the outcome failed", len(items))
            self._reload(lane, items)

    def _reload(self, lane: Lane, items: list[Item]) -> None:
        for item in items:
            if item.row.id in lane.inflight:
                self._release(lane, item.row.id)
        self._schedule(lane.id, self._clock.now() + RELOAD_DELAY)

    async def _attempt(self, lane: Lane, items: list[Item]) -> None:
        subscription = self._subscriptions.get(lane.id)
        if subscription is None:
            for item in items:
                self._completions.dropped(lane, item)
            return
        held = [item for item in items if self._log.holds(item.row)]
        if len(held) < len(items):  # a lapsed claim (see Attempts): leave those to the log
            self._reload(lane, [item for item in items if item not in held])
        if not held:
            return
        admitted = [item for item in held if self._circuits.admits(lane.id, item.row.id)]
        if len(admitted) < len(held):  # only the probe goes while the circuit is open
            refused = [item for item in held if item not in admitted]
            await let_go(self._log, lane, refused, self._release, self._schedule)
            held = admitted
        if not held:
            return
        policy, destination = lane.configure(subscription)
        # Each delivery transformed on its own: those dropped or failed are settled here, the
        # rest go out together (a batch carries no per-event $delivery).
        events = []
        sent = []
        for item in held:
            prepared = await self._transformer.apply(
                lane, item, subscription, policy, destination, batch=True
            )
            if prepared is not None:
                events.append(prepared[0])
                sent.append(item)
        held = sent
        if not held:
            return
        if lane.limiter is not None:  # the rate limit counts deliveries, batched or not
            for _ in held:
                await lane.limiter.acquire()
        sender = self._senders.get(subscription.protocol)
        try:
            if not isinstance(sender, BatchSender):
                raise DeliveryRejected(
                    f"{subscription.protocol} deliveries cannot be batched", retryable=False
                )
            replies = self._replies
            if replies is not None and wants_replies(subscription) and isinstance(sender, ReplyingSender):
                reply = await sender.deliver_batch_replying(events, destination, limit=replies.limit)
                await self._circuits.answered(lane.id)  # the sink answered, whatever the reply
                try:
                    # Committed before the deliveries complete (a crash in between retries them).
                    await replies.publish(subscription, [item.event for item in held], reply)
                except HopLimit as exc:
                    for item in held:
                        outcome = GiveUp(item.row.attempts + 1, str(exc), None, None)
                        await self._failures.give_up(lane, item, policy, outcome)
                    return
                except DeliveryError as exc:  # not the sink's fault: no count toward its circuit
                    for item in held:
                        await self._failures.failed(lane, item, policy, exc, circuit_open=False)
                    return
            else:
                await sender.deliver_batch(events, destination)
        except DeliveryError as exc:
            await self._failed(lane, held, policy, exc)
        except Exception as exc:  # a sender bug must not kill the lane; treat it as transient
            log.exception("sender for %s raised an unexpected error", subscription.protocol)
            await self._failed(lane, held, policy, DeliveryError(f"sender error: {exc!r}"))
        else:
            label = self._metrics.label(lane.id)
            now = self._clock.now()
            self._metrics.deliveries.labels(label, "delivered").inc(len(held))
            self._metrics.last_delivered[lane.id] = now
            latency = self._metrics.latency.labels(label)
            for item in held:
                latency.observe(max(0.0, now - item.row.first_at))
                self._completions.delivered(lane, item)
            await self._circuits.answered(lane.id)

    async def _failed(
        self, lane: Lane, items: list[Item], policy: DeliveryPolicy, error: DeliveryError
    ) -> None:
        head = items[0].row
        # One request failed: one failed attempt of the sink, counted once (with the head as
        # the attempt: a probe is a batch of one).
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
        outcomes = await asyncio.gather(
            *(
                self._failures.failed(lane, item, policy, error, at=at, circuit_open=circuit_open)
                for item in items
            ),
            return_exceptions=True,
        )
        lost = [
            item for item, outcome in zip(items, outcomes, strict=True) if isinstance(outcome, BaseException)
        ]
        if lost:
            log.debug("a batch: recording %d failed deliveries failed; they are loaded again", len(lost))
            self._reload(lane, lost)
