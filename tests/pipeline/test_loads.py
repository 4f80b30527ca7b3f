"""How often a backlog's deliveries are read from a log that is not shared: a lane more than half
full, with work queued for every worker, is not loaded again each time a few slots free up, and
a load leaves out the deliveries already in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path

import pytest
from support.sinks import Reply, Sink

from cebroker.pipeline.component import PipelineComponent
from cebroker.pipeline.dispatch import completions
from cebroker.settings import Settings
from cebroker.storage import Incoming, Limits, Pending, create_storage
from cebroker.subscription import Subscription

EVENTS = 600


#: The log's ``due`` (its keyword ``held`` included).
Due = Callable[..., Awaitable[tuple[list[Pending], float | None]]]


async def _drain(
    db: Path, url: str, monkeypatch: pytest.MonkeyPatch, wrap: Callable[[Due], Due]
) -> tuple[int, int]:
    """Deliver a backlog of :data:`EVENTS` (more than a lane holds: it is loaded again as it
    drains) at concurrency 4, with the log's reads of due deliveries replaced by ``wrap`` of
    them; (deliveries pending at the end, dead letters written)."""
    storage = create_storage(db)
    await storage.open()
    sub = Subscription(id="s", protocol="HTTP", sink=url, config={"concurrency": "4"})
    await storage.subscriptions.create(sub)
    await storage.deliveries.append(
        [
            Incoming(
                {"id": f"e{n}", "source": "/t", "specversion": "1.0", "type": "t"}, "/t", f"e{n}", ("s",)
            )
            for n in range(EVENTS)
        ]
    )
    monkeypatch.setattr(storage.deliveries, "due", wrap(storage.deliveries.due))
    settings = Settings(db=db, webhook_validation=False)
    component = PipelineComponent(settings, storage.subscriptions, storage.deliveries, storage.circuits)
    await component.start()
    try:
        for _ in range(3000):  # thirty seconds at most
            if not component.dispatcher.pending:
                break
            await asyncio.sleep(0.01)
        pending = component.dispatcher.pending
    finally:
        await component.stop()
    letters = await storage.deliveries.dead_letters("s", 0, 2 * EVENTS)
    await storage.close()
    return pending, len(letters)


def test_a_backlog_is_read_from_the_log_about_once(
    tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = [0]

    def counted(due: Due) -> Due:
        async def counting(
            subscription: str, limit: int, limits: Limits | None = None, *, held: Collection[int] = ()
        ) -> tuple[list[Pending], float | None]:
            rows, later = await due(subscription, limit, limits, held=held)
            read[0] += len(rows)
            return rows, later

        return counting

    pending, _ = asyncio.run(_drain(tmp_path / "b.db", sink.url + "/d", monkeypatch, counted))
    rows = read[0]
    assert pending == 0
    assert len({r.headers["ce-id"] for r in sink.at("/d")}) == EVENTS
    # A load that read the lane's deliveries in memory again, whenever a few of its 256 slots
    # freed up, read each delivery about 256 / 4 times at concurrency 4; one that read them again
    # only when half of the lane was free, under twice. The log leaves them out now: each
    # delivery of the backlog is read once.
    assert rows <= 2 * EVENTS, f"{rows} rows read for {EVENTS} deliveries"
    assert rows == EVENTS, f"{rows} rows read for {EVENTS} deliveries"


def test_a_read_of_due_deliveries_that_answers_late_queues_none_twice(
    tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery settled while a read of the log was under way is not taken from that read's
    stale answer and attempted again."""
    sink.default["/bad"] = Reply(status=400, body=b"refused")

    def late(due: Due) -> Due:
        async def answering_late(
            subscription: str, limit: int, limits: Limits | None = None, *, held: Collection[int] = ()
        ) -> tuple[list[Pending], float | None]:
            rows, later = await due(subscription, limit, limits, held=held)
            await asyncio.sleep(0.05)  # widens the window between the read and its use
            return rows, later

        return answering_late

    _, letters = asyncio.run(_drain(tmp_path / "l.db", sink.url + "/bad", monkeypatch, late))
    ids = [r.headers["ce-id"] for r in sink.at("/bad")]
    assert len(ids) == len(set(ids)) == EVENTS, "each delivery attempted once"
    assert letters == EVENTS


def test_done_deliveries_waiting_for_their_write_leave_room_for_the_next(
    tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery done but not yet written (its completion write gathers more) counts against its
    lane only beyond the lane's capacity: while the writes wait, the lane reads and delivers the
    next deliveries of the log (no more than its concurrency at once) instead of waiting for the
    write, and stops once it holds twice its capacity, the bound on memory."""
    monkeypatch.setattr(completions, "GATHER", 3600.0)  # no write for an hour...
    monkeypatch.setattr(completions, "GROUP", 10 * EVENTS)  # ...nor for a full group

    async def run() -> tuple[int, int, int, int, int]:
        db = tmp_path / "w.db"
        storage = create_storage(db)
        await storage.open()
        sub = Subscription(id="s", protocol="HTTP", sink=sink.url + "/w", config={"concurrency": "4"})
        await storage.subscriptions.create(sub)
        await storage.deliveries.append(
            [
                Incoming(
                    {"id": f"e{n}", "source": "/t", "specversion": "1.0", "type": "t"}, "/t", f"e{n}", ("s",)
                )
                for n in range(EVENTS)
            ]
        )
        component = PipelineComponent(
            Settings(db=db, webhook_validation=False),
            storage.subscriptions,
            storage.deliveries,
            storage.circuits,
        )
        await component.start()
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while (lane := component.dispatcher._lanes.find("s")) is None:  # the loader makes it
                assert asyncio.get_running_loop().time() < deadline, "no lane"
                await asyncio.sleep(0.01)
            bound = 2 * lane.capacity
            assert bound < EVENTS
            while lane.settling < bound:  # polled: every place held by a done delivery
                assert asyncio.get_running_loop().time() < deadline, f"{lane.settling} done of {bound}"
                await asyncio.sleep(0.01)
            held = (lane.settling, len(lane.inflight), len(lane.queue), lane.free, bound)
        finally:
            await component.stop()
        await storage.close()
        return held

    settling, inflight, queued, free, bound = asyncio.run(run())
    # Every delivery in memory is done and waits for its write; none is queued or being sent,
    # and the lane takes no more: it holds twice its capacity.
    assert (settling, inflight, queued, free) == (bound, bound, 0, 0)
    ids = sink.ids("/w")
    assert len(ids) == len(set(ids)) == bound, "each delivered once, and no more than the lane holds"
    assert sink.max_inflight <= 4, "never more than the subscription's concurrency at once"
