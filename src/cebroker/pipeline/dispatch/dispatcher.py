"""The dispatcher: wires the delivery parts together and is the pipeline's one handle on them.

* :class:`~.lanes.Lanes`: per-subscription lanes and their workers;
* :class:`~.attempts.Attempts`: one delivery attempt through the protocol's sender;
* :class:`~.batches.BatchAttempts`: a batch of deliveries in one request (:mod:`.batcher`);
* :class:`~.outcomes.Settler`: what an attempt came to, acted on in one place (with
  :func:`~.retry.decide` for a failure: retry later or dead-letter);
* :class:`~.circuits.Circuits`: a circuit per sink, its probes and time-to-live sweeps;
* :class:`~.deadletters.DeadLetterForwarder`: copies to the dead-letter sink;
* :class:`~.completions.Completions`: confirmed and dropped deliveries written in batches;
* :class:`~.loader.Loader`: due deliveries loaded from the log;
* :class:`~.backlog.Backlog`: the count of deliveries pending in the log.

Deliveries of an ordered subscription (``config.ordering``) always go through the log, which
hands out one of each ordering group at a time; when one of them settles, the loader looks for
the next. Deliveries a replay queued (:mod:`cebroker.pipeline.replays`) take the same path as
live ones; when one settles, ``replay_settled`` is told, so the replay can queue more.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.pipeline.brokerevents import BrokerEvents
from cebroker.pipeline.dispatch.attempts import Attempts
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.batches import BatchAttempts
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.completions import Completions
from cebroker.pipeline.dispatch.deadletters import DeadLetterForwarder
from cebroker.pipeline.dispatch.due import DueTimes
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.lanes import Lanes
from cebroker.pipeline.dispatch.loader import Loader
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.outcomes import RELOAD_DELAY, Settler
from cebroker.pipeline.dispatch.replies import Replies
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.dispatch.slots import Slots
from cebroker.pipeline.dispatch.tasks import Tasks
from cebroker.pipeline.dispatch.transforming import Transformer
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.senders import SenderPool
from cebroker.pipeline.transform import OutputCheck
from cebroker.storage.circuits import CircuitStore
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import Appended, DeliveryLog, Pending
from cebroker.storage.errors import StorageUnavailable
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

log = logging.getLogger("cebroker.pipeline")

#: With a shared log: seconds between looks at the whole log (a safety net under the
#: notifications) and between reads of the shared backlog count.
RESCAN_EVERY = 5.0
BACKLOG_EVERY = 1.0


class Dispatcher:
    """Delivers pending deliveries through each subscription's lane, with retries and dead letters.

    ``clock`` is the time every part reads and sleeps on (the log must use the same one);
    ``circuits`` is the store of open circuits and ``probe_max_delay`` the broker's longest
    wait between two probes of a sink whose circuit is open. ``claims`` (a shared backend's, see
    :class:`~cebroker.storage.claims.Claims`) makes every part take its work by claims within
    limits held for all instances; without it the dispatcher is the log's only reader.
    """

    def __init__(
        self,
        journal: DeliveryLog,
        matcher: Matcher,
        senders: SenderPool,
        metrics: PipelineMetrics,
        *,
        circuits: CircuitStore,
        clock: Clock = SYSTEM_CLOCK,
        lane_capacity: int = 256,
        probe_max_delay: float = 10.0,
        replay_settled: Callable[[], None] = lambda: None,
        output_check: OutputCheck | None = None,
        pulled: Callable[[str | None], None] = lambda _: None,
        tracing: Tracing = NO_TRACING,
        replies: Replies | None = None,
        broker_events: BrokerEvents | None = None,
        claims: Claims | None = None,
    ) -> None:
        #: Sink replies of subscriptions with ``config.reply: publish`` (None: never published).
        self.replies = replies
        #: The broker's own events (None: none emitted).
        self.broker_events = broker_events
        self._log = journal
        self._claims = claims
        self._pulled = pulled
        self._clock = clock
        self._subscriptions = matcher.subscriptions
        self._ordered = matcher.ordered
        #: Every subscription's delivery setup (policy, destination, batches), made once per revision.
        self._setups = DeliverySetups(clock)
        self.backlog = Backlog(metrics.backlog)
        #: What waits in the log, and when it falls due: written by every part, read by the loader.
        self._due = DueTimes(self._subscriptions)
        self._last_delivered = metrics.last_delivered
        self._forwarder = DeadLetterForwarder(
            senders, events=broker_events, subscriptions=self._subscriptions
        )
        # The one cycle: lanes run attempts, and an attempt's outcome frees its lane's place
        # (and a circuit pushes its probe into a lane). The lanes are made first and given two
        # methods of this dispatcher that reach the attempts, made after them.
        self._lanes = Lanes(
            capacity=lane_capacity,
            clock=clock,
            subscriptions=self._subscriptions,
            setups=self._setups,
            attempt=self._attempt,
            attempt_batch=self._attempt_batch,
            claims=claims,
        )
        self.circuits = Circuits(
            store=circuits,
            journal=journal,
            lanes=self._lanes,
            subscriptions=self._subscriptions,
            setups=self._setups,
            metrics=metrics,
            clock=clock,
            backlog=self.backlog,
            forwarder=self._forwarder,
            schedule=self._due.schedule,
            probe_max_delay=probe_max_delay,
            events=broker_events,
            claims=claims,
        )
        slots = Slots(
            due=self._due,
            lanes=self._lanes,
            circuits=self.circuits,
            ordered=self._ordered,
            replay_settled=replay_settled,
        )
        self._completions = Completions(
            journal,
            self.backlog,
            slots.release_all,
            clock,
            waits=self._waits,
            counted=metrics.count_delivered,
            settling=slots.settling,
            shared=claims is not None,
        )
        settler = Settler(
            journal=journal,
            subscriptions=self._subscriptions,
            metrics=metrics,
            clock=clock,
            backlog=self.backlog,
            completions=self._completions,
            forwarder=self._forwarder,
            circuits=self.circuits,
            release=slots.release,
            schedule=self._due.schedule,
            tracing=tracing,
            claims=claims,
        )
        transformer = Transformer(metrics=metrics, check=output_check)
        self._attempts = Attempts(
            senders=senders,
            subscriptions=self._subscriptions,
            circuits=self.circuits,
            settler=settler,
            transformer=transformer,
            setups=self._setups,
            tracing=tracing,
            replies=replies,
            claims=claims,
        )
        self._batches = BatchAttempts(
            senders=senders,
            subscriptions=self._subscriptions,
            circuits=self.circuits,
            settler=settler,
            transformer=transformer,
            setups=self._setups,
            tracing=tracing,
            replies=replies,
            claims=claims,
        )
        self._loader = Loader(
            journal,
            self._lanes,
            subscriptions=self._subscriptions,
            setups=self._setups,
            metrics=metrics,
            clock=clock,
            due=self._due,
            deleted=self._deleted,
            closed=self.circuits.closed,
            claims=claims,
        )
        self._loops = Tasks()
        self._cleanups = Tasks()
        self._unwatch: Callable[[], None] | None = None

    @property
    def pending(self) -> int:
        """Deliveries in the log (the durable backlog)."""
        return self.backlog.pending

    async def start(self) -> None:
        """Resume every pending delivery found in the log and start the background loops."""
        await self.circuits.restore()  # first: a sink that was down gets a probe, not the backlog
        for subscription, (count, due_at) in (await self._log.backlog()).items():
            if subscription in self._subscriptions:
                if self._subscriptions[subscription].pull:
                    continue  # its consumers receive it: not pushed, not in the push backlog
                self._due.schedule(subscription, due_at)
                self.backlog.added(count)
            else:  # deleted while the broker was down
                await self._log.forget(subscription)
        self._loops.spawn(self._loader.run(), name="cebroker-loader")
        self._loops.spawn(self._completions.run(), name="cebroker-completions")
        self._loops.spawn(self.circuits.run(), name="cebroker-circuits")
        if self._claims is not None:  # other instances share the log: hear of their work too
            self._unwatch = self._claims.watch(self._heard)
            self._loops.spawn(self._loader.rescan(RESCAN_EVERY), name="cebroker-rescan")
            self._loops.spawn(self._follow_backlog(), name="cebroker-backlog")
            self._loops.spawn(self.circuits.follow(RESCAN_EVERY), name="cebroker-circuits-follow")

    async def _follow_backlog(self) -> None:
        """With a shared log the backlog is every instance's: read it from the log, briefly cached."""
        while True:
            try:
                mark = self.backlog.mark()
                self.backlog.read(await self._log.pending(), mark)
            except Exception:
                log_failure("reading the shared backlog failed")
            await self._clock.sleep(BACKLOG_EVERY)

    def _heard(self, subscription: str | None) -> None:
        """A shared log says deliveries of ``subscription`` (None: of any) wait unclaimed."""
        current = None if subscription is None else self._subscriptions.get(subscription)
        if subscription is None or (current is not None and current.pull):
            self._pulled(subscription)  # consumers waiting on this instance look again
        self._loader.heard(subscription)

    def stop_soon(self) -> None:
        """The broker is stopping: start no further delivery; :meth:`stop` follows."""
        self._lanes.stop_soon()

    async def stop(self, grace: float = 0.0) -> None:
        """Stop loading and delivering; deliveries not confirmed stay pending in the log. The
        attempts under way get up to ``grace`` seconds to finish first (graceful shutdown)."""
        if self._unwatch is not None:
            self._unwatch()
        await self._lanes.stop(grace)
        await self._loops.cancel()
        await self._forwarder.stop()
        await self._cleanups.cancel()
        await self._completions.flush()

    def accept(
        self,
        events: Sequence[dict[str, Any]],
        written: Sequence[Appended | None],
        traces: Sequence[str | None] | None = None,
    ) -> None:
        """Take the deliveries of a committed ingest (``written``, per event; ``traces``: each
        event's stored trace context, when traced) into their lanes."""
        added = 0
        for index, (event, appended) in enumerate(zip(events, written, strict=True)):
            if appended is None:
                continue
            for delivery_id, subscription in appended.deliveries:
                current = self._subscriptions.get(subscription)
                if current is not None and current.pull:
                    self._pulled(subscription)  # its consumers receive it: never pushed
                    continue
                added += 1
                # A shared log: this instance claims it like any other; ordered: the log says
                # which of a group goes next.
                if not appended.held or subscription in self._ordered:
                    self._due.schedule(subscription, 0.0)
                    continue
                # It waits in the log while older ones do (the lane's order), the lane is full
                # or the sink's circuit is open.
                waits = self._due.waiting(subscription) or not self.circuits.closed(subscription)
                lane = None if waits or current is None else self._lanes.get(current)
                if lane is None or lane.free <= 0:
                    self._due.schedule(subscription, 0.0)
                    continue
                trace = traces[index] if traces is not None else None
                row = Pending(delivery_id, appended.seq, subscription, 0, appended.at, None, trace=trace)
                lane.push(Item(row, event))
                self._lanes.start_workers(lane)
        self.backlog.added(added)

    def unhanded(self, deliveries: Sequence[tuple[int, str]]) -> None:
        """``(delivery id, subscription)`` committed to the log that :meth:`accept` failed to
        take: their subscriptions load them from the log (a delivery it took already is loaded
        again at most once more: at least once)."""
        self.backlog.added(len(deliveries))
        for subscription in {subscription for _, subscription in deliveries}:
            current = self._subscriptions.get(subscription)
            if current is not None and current.pull:
                self._pulled(subscription)
            else:
                self._due.schedule(subscription, 0.0)

    def redriven(self, subscription: str, count: int) -> None:
        """``count`` dead letters of ``subscription`` were put back in the log as deliveries."""
        self.backlog.added(count)
        self._due.schedule(subscription, 0.0)

    def replaced(self, subscription: Subscription) -> None:
        """A subscription was replaced: its lane follows the new revision, and a circuit open
        for its former sink closes."""
        self._lanes.replaced(subscription)
        self._cleanups.spawn(self.circuits.replaced(subscription))

    def replayed(self, subscription: str, count: int) -> None:
        """A replay put ``count`` deliveries of ``subscription`` in the log."""
        self.backlog.added(count)
        self._due.schedule(subscription, 0.0)

    def withdrawn(self, count: int) -> None:
        """A cancelled replay took ``count`` of its deliveries out of the log."""
        self.backlog.settled(count)

    def in_flight(self, subscription: str) -> set[int]:
        """The deliveries of ``subscription`` held in memory (queued or being attempted)."""
        lane = self._lanes.find(subscription)
        return set(lane.inflight) if lane is not None else set()

    async def forget(self, subscription: str) -> None:
        """A subscription was deleted: drop its lane and everything the log keeps for it."""
        self._due.forget(subscription)
        self._lanes.drop(subscription)
        self._setups.forget(subscription)
        self._last_delivered.pop(subscription, None)
        self.circuits.forget(subscription)
        await self.circuits.discard_stored(subscription)
        try:
            removed = await self._log.forget(subscription)
        except StorageUnavailable as exc:
            # Its rows stay; the loader finds them again, sees the subscription gone and retries.
            log.debug("forgetting subscription %s failed: %s", subscription, exc)
            self._due.schedule(subscription, self._clock.now() + RELOAD_DELAY)
            return
        self.backlog.settled(removed)

    # The lanes' two ways into the attempts (see the cycle in __init__).

    # They hand over the attempt's coroutine rather than await it: no frame of their own that
    # every resumption of every delivery passes through.

    def _attempt(self, lane: Lane, item: Item) -> Awaitable[None]:
        return self._attempts.run(lane, item)

    def _attempt_batch(self, lane: Lane, items: list[Item]) -> Awaitable[None]:
        return self._batches.run(lane, items)

    def _waits(self, subscription: str) -> bool:
        """Whether the next delivery of ``subscription`` waits for the removal of one settled (as
        in :meth:`.slots.Slots.release`: an ordered subscription, or one whose deliveries in the
        log all wait behind an ordering group's head)."""
        return subscription in self._ordered or self._due.held_back(subscription)

    def _deleted(self, subscription: str) -> None:
        """The loader found rows of a deleted subscription: the clean-up reaches every part, so
        the loader hands it to this owner of them all."""
        self._cleanups.spawn(self.forget(subscription))
