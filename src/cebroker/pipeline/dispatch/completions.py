"""Records finished deliveries in the durable log, many per write.

Confirmed deliveries are removed from the log and counted as delivered once their removal is
written (one count per subscription and write, not one per delivery); deliveries of a
subscription deleted meanwhile are removed without a count. Outcomes are gathered for a moment
when few wait (:data:`GATHER`), so that a write carries many, unless a next delivery waits for
the write (an ordering group's next, a replay's next window), and no longer than until every
delivery pending in the log is collected (no other outcome could join the write). A delivery
stays in flight in its lane until its removal has committed, so that the loader never hands it
out again; a write that fails is tried again a moment later with everything that came in
meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.storage.outcomes import Outcomes

log = logging.getLogger("cebroker.pipeline")

#: Seconds before a failed completion write is tried again.
RETRY_PAUSE = 1.0
#: While fewer outcomes than :data:`GROUP` wait to be written, more are gathered for
#: :data:`GATHER` seconds first (not when a next delivery waits for the write: see Completions).
#: Each write is a transaction of the log, whose cost is mostly per transaction (its commit
#: writes every page it touched, and its statements hand the interpreter lock back and forth
#: with the event loop): written as they came, a drain at concurrency 32 made groups of about 25
#: and the log's writer spent 13 to 15 µs per delivery; gathered for 2 ms up to 64, 11 to 12 µs;
#: for 8 ms up to 256, 7 to 9.5 µs (docs/performance.md, "The fifth round"). Their lane slots
#: are held that much longer (a lane holds 256); the deliveries themselves are not held up.
GROUP = 256
GATHER = 0.008
#: :data:`GROUP` and :data:`GATHER` with a shared log's claims: there a delivery counts against
#: its subscription's concurrency share until its outcome is written (the claim is held until
#: then), so gathering longer would leave fewer deliveries in flight.
SHARED_GROUP = 64
SHARED_GATHER = 0.002

#: Frees a delivery's slot in its lane once its outcome is recorded.
Release = Callable[[Lane, int], None]
#: Frees the slots of deliveries of one lane once their outcomes are recorded.
ReleaseAll = Callable[[Lane, Sequence[int]], None]
#: Adds deliveries of a subscription whose confirmation was written to its ``delivered`` count.
Counted = Callable[[str, int], None]
#: Hears that a delivery of a lane is done and waits for its completion write.
Settling = Callable[[Lane], None]


class Completions:
    """Collects delivered and dropped deliveries; :meth:`run` writes them as they come.

    ``waits`` says whether the next delivery of a subscription waits for its deliveries' removal
    (an ordered one's: the log releases an ordering group's next only then): those are written
    without gathering more, and so are a replay's (a replay queues its next deliveries only
    once its window's have settled) and a batching lane's (its outcomes come a request at a
    time, each a group already, and its lane holds only a few requests' worth: gathered, a
    batch's slots would stay held for :data:`GATHER`). ``counted`` hears, after each write,
    how many confirmed deliveries of each subscription it recorded. ``settling`` hears of each
    delivery collected (its lane may load the next ones now: see :attr:`~.lane.Lane.free`).
    ``shared``: the log is shared and claimed (:data:`SHARED_GATHER`)."""

    def __init__(
        self,
        journal: Outcomes,
        backlog: Backlog,
        release: ReleaseAll,
        clock: Clock,
        waits: Callable[[str], bool] = lambda _: False,
        counted: Counted = lambda _subscription, _count: None,
        settling: Settling = lambda _lane: None,
        shared: bool = False,
    ) -> None:
        self._shared = shared
        self._settling = settling
        self._log = journal
        self._backlog = backlog
        self._release = release
        self._clock = clock
        self._waits = waits
        self._counted = counted
        #: Done deliveries, and whether each was confirmed by its sink (else a transformation
        #: dropped it, which its caller counted).
        self._delivered: list[tuple[Lane, Item, bool]] = []
        self._dropped: list[tuple[Lane, Item]] = []
        self._pending = asyncio.Event()
        #: Something collected is to be written without gathering more (see above).
        self._urgent = False
        #: Ends a gathering moment early: every pending delivery is collected (see :meth:`run`).
        self._all_in = asyncio.Event()
        #: Outcomes in the write under way (still pending in the backlog until it commits).
        self._writing = 0

    def delivered(self, lane: Lane, item: Item, *, confirmed: bool = True) -> None:
        """``item`` is done: the sink confirmed it (counted as delivered once written), or not
        ``confirmed`` (its transformation dropped it: removed from the log the same way)."""
        self._delivered.append((lane, item, confirmed))
        self._collected(lane, item)

    def dropped(self, lane: Lane, item: Item) -> None:
        """``item`` belongs to a deleted subscription: remove it, undelivered."""
        self._dropped.append((lane, item))
        self._collected(lane, item)

    def _collected(self, lane: Lane, item: Item) -> None:
        """``item``'s outcome waits to be written: at once if something waits for it (see the
        class docstring), else after a gathering moment. Until then it counts as
        :attr:`~.lane.Lane.settling` in its lane."""
        lane.settling += 1
        if not lane.loading:  # (a load under way takes what room there is)
            self._settling(lane)
        if not self._urgent and (
            item.row.replay is not None or lane.batch is not None or self._waits(lane.id)
        ):
            self._urgent = True
        self._pending.set()
        if len(self._delivered) + len(self._dropped) + self._writing >= self._backlog.pending:
            self._all_in.set()

    async def run(self) -> None:
        """Write what has come in, whenever something has; forever."""
        while True:
            await self._pending.wait()
            group, gather = (SHARED_GROUP, SHARED_GATHER) if self._shared else (GROUP, GATHER)
            collected = len(self._delivered) + len(self._dropped)
            if not self._urgent and collected < group and collected + self._writing < self._backlog.pending:
                # Real time, not the clock's: a window for outcomes arriving meanwhile, which a
                # test's clock that stands still must not hold closed. It ends early once every
                # delivery pending in the log is collected (or being written): no other outcome
                # can join the write then, and a drain's last deliveries would stay pending for
                # the whole moment (docs/performance.md, "Protocol deliveries, the fourth round").
                all_in = self._all_in
                all_in.clear()
                timer = asyncio.get_running_loop().call_later(gather, all_in.set)
                try:
                    await all_in.wait()
                finally:
                    timer.cancel()
            self._pending.clear()
            try:
                await self.flush()
            except Exception:
                log_failure("recording completed deliveries failed; will retry")
                await self._clock.sleep(RETRY_PAUSE)
                self._pending.set()

    async def flush(self) -> None:
        """Write everything collected so far; on failure it is kept for the next try."""
        done, self._delivered = self._delivered, []
        dropped, self._dropped = self._dropped, []
        urgent, self._urgent = self._urgent, False
        self._writing = len(done) + len(dropped)
        # One pass over what is written: the log's rows, the slots to free per lane, the
        # confirmed deliveries to count per subscription.
        rows: list[tuple[int, int, str]] = []
        settled: dict[Lane, list[int]] = {}
        counts: dict[str, int] = {}
        for lane, item, confirmed in done:
            row = item.row
            rows.append((row.id, row.event_seq, lane.id))
            ids = settled.get(lane)
            if ids is None:
                ids = settled[lane] = []
            ids.append(row.id)
            if confirmed:
                counts[lane.id] = counts.get(lane.id, 0) + 1
        try:
            if rows:
                await self._log.complete(rows)
            removed = (
                await self._log.drop([(i.row.id, i.row.event_seq) for _, i in dropped]) if dropped else 0
            )
        except BaseException:
            self._delivered[:0], self._dropped[:0] = done, dropped
            self._urgent = self._urgent or urgent
            raise
        finally:
            self._writing = 0
        for lane, item in dropped:
            settled.setdefault(lane, []).append(item.row.id)
        for subscription, count in counts.items():
            self._counted(subscription, count)
        for lane, ids in settled.items():
            lane.settling -= len(ids)
            self._release(lane, ids)
        self._backlog.settled(len(done) + removed)
