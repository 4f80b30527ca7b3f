"""Freeing a delivery's place in its lane once its outcome is recorded (or it was let go).

What follows a freed place depends on what else the subscription has: its sink's circuit hears
of it (a probe that ended without an outcome is retried), a replay learns that one of its
deliveries settled, and the next delivery is looked for: in an ordered subscription (or one whose
log rows all wait behind an ordering group's head) the next of its group may be due now; if more
wait in the log the loader looks again; otherwise an idle lane is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.due import DueTimes
from cebroker.pipeline.dispatch.lane import Lane
from cebroker.pipeline.dispatch.lanes import Lanes


class Slots:
    """Frees lane places (:meth:`release`); ``ordered`` holds the ids of ordered subscriptions
    (live), and ``replay_settled`` is told when a delivery a replay queued settles."""

    def __init__(
        self,
        *,
        due: DueTimes,
        lanes: Lanes,
        circuits: Circuits,
        ordered: Container[str],
        replay_settled: Callable[[], None],
    ) -> None:
        self._due = due
        self._lanes = lanes
        self._circuits = circuits
        self._ordered = ordered
        self._replay_settled = replay_settled

    def settling(self, lane: Lane) -> None:
        """A delivery of ``lane`` is done and waits only for its completion write, so its place
        counts as free (:attr:`~.lane.Lane.free`). If more of the subscription wait in the log
        and its workers are about to run out (fewer than twice its concurrency queued), wake the
        loader, so that the next deliveries are read while the completions gather rather than
        after their write. Not earlier: read whenever half the lane was free, a drain made twice
        as many reads, and an HTTP drain, whose lane did not run short, spent about 5 % more CPU
        per delivery (docs/performance.md, "Protocol deliveries, the fourth round"). Not when the
        loader would leave the lane as it is (:meth:`.loader.Loader._saturated`), for an ordered
        subscription (its next is due only after the write) nor with a shared log's claims:
        there a delivery counts against its subscription's share until its outcome is written
        (:meth:`~.lane.Lane.room`), so nothing more could be read yet."""
        if lane.loading or lane.claims is not None or not self._due.waiting(lane.id):
            return
        setup = lane.setup
        concurrency = setup.policy.concurrency if setup is not None else 1
        queued = len(lane.queue)
        if queued >= 2 * concurrency:
            return  # (the cheap test first: it fails most often)
        if queued >= concurrency and lane.free * 2 < lane.capacity:
            return
        if lane.id not in self._ordered:
            self._due.wake()

    def release(self, lane: Lane, delivery_id: int) -> None:
        """A delivery's outcome is recorded: free its slot in the lane."""
        self.release_all(lane, (delivery_id,))

    def release_all(self, lane: Lane, delivery_ids: Sequence[int]) -> None:
        """The outcomes of deliveries of one lane are recorded (a completion write carries many):
        free their slots, then look for what follows once for them all."""
        inflight, replayed = lane.inflight, lane.replayed
        settled = lane.settled_while_loading if lane.loading else None
        for delivery_id in delivery_ids:
            inflight.discard(delivery_id)
            if settled is not None:
                settled.add(delivery_id)
            if replayed and delivery_id in replayed:
                replayed.discard(delivery_id)
                self._replay_settled()
        if not self._circuits.closed(lane.id):  # an open circuit: its probe may be among them
            for delivery_id in delivery_ids:
                self._circuits.released(lane.id, delivery_id)
        if lane.id in self._ordered or self._due.held_back(lane.id):
            # The next of its group may be due now. The lane stays (a load in progress may be
            # about to fill it); the loader drops it once the log holds nothing more of it.
            self._due.schedule(lane.id, 0.0)
        elif self._due.waiting(lane.id):
            self._due.wake()  # more of the subscription's deliveries wait in the log
        else:
            self._lanes.drop_if_idle(lane)
