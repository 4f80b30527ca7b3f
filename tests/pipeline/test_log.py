"""The durable log on a real SQLite file: append with de-duplication, read-back, completion,
dead letters and re-drive (issue "Ingress": (source, id) window; "Matching and dispatch")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson

from cebroker.pipeline.log import DeliveryLog, Incoming

EV = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": {"amount": 1.50, "name": "é"}}


async def test_append_dedups_within_the_window_and_after_it(tmp_path: Path) -> None:
    log = DeliveryLog(tmp_path / "l.db", dedup_window=0.3)
    await asyncio.to_thread(log.open)
    try:
        first = await log.append([Incoming(EV, "/s", "1", ("a", "b")), Incoming(EV, "/s", "1", ("a",))])
        assert first[1] is None
        assert first[0] is not None
        assert [sub for _, sub in first[0].deliveries] == ["a", "b"]
        assert await log.append([Incoming(EV, "/s", "1", ("a",))]) == [None]
        await asyncio.sleep(0.35)
        again = await log.append([Incoming(EV, "/s", "1", ("a",))])
        assert again[0] is not None
        assert len(again[0].deliveries) == 1
        assert await log.purge_seen() == 0  # the key was just refreshed
    finally:
        await asyncio.to_thread(log.close)


async def test_events_read_back_as_sent_and_complete_removes_them(tmp_path: Path) -> None:
    """Stored JSON keeps the values; pre-serialized events (bytes) are accepted too."""
    log = DeliveryLog(tmp_path / "l.db", dedup_window=60)
    await asyncio.to_thread(log.open)
    try:
        raw = orjson.dumps({**EV, "id": "2"})
        await log.append([Incoming(EV, "/s", "1", ("a",)), Incoming(raw, "/s", "2", ("a",))])
        rows, later = await log.due("a", 10)
        assert later is None
        assert [json.loads(r.body or "") for r in rows] == [EV, {**EV, "id": "2"}]
        assert (await log.backlog())["a"][0] == 2
        await log.complete([(rows[0].id, rows[0].event_seq, "a")])
        await log.dead_letter(rows[1], rows[1].body or b"", 3, "sink answered 400", "400", "no")
        assert await log.backlog() == {}
        status = await log.status("a")
        assert (status["delivered"], status["failed"], status["deadlettered"]) == (1, 1, 1)
        (dead,) = await log.dead_letters("a", 0, 10)
        assert (dead.event["id"], dead.status, dead.attempts) == ("2", "400", 3)
        assert await log.redrive("a", [dead.id + 1]) == 0
        assert await log.redrive("a", None) == 1
        rows, _ = await log.due("a", 10)
        assert [json.loads(r.body or "")["id"] for r in rows] == ["2"]
        assert rows[0].attempts == 0
        assert await log.forget("a") == 1
        assert await log.backlog() == {}
    finally:
        await asyncio.to_thread(log.close)


async def test_concurrent_appends_are_merged_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    """Group commit: concurrent calls share a write; a call whose event cannot be serialised
    fails on its own and stores nothing, the others are committed."""
    log = DeliveryLog(tmp_path / "l.db", dedup_window=60)
    await asyncio.to_thread(log.open)
    try:
        good = [[Incoming({**EV, "id": f"g{n}"}, "/s", f"g{n}", ("a",))] for n in range(20)]
        bad = [Incoming({**EV, "id": "bad", "x": object()}, "/s", "bad", ("a",))]
        outcomes = await asyncio.gather(
            *(log.append(c) for c in [*good[:10], bad, *good[10:]]), return_exceptions=True
        )
        assert isinstance(outcomes[10], TypeError)
        assert all(isinstance(o, list) and o[0] is not None for i, o in enumerate(outcomes) if i != 10)
        rows, _ = await log.due("a", 100)
        assert sorted(json.loads(r.body or "")["id"] for r in rows) == sorted(f"g{n}" for n in range(20))
        # The bad event's key was rolled back with it: the same (source, id) is accepted later.
        assert (await log.append([Incoming({**EV, "id": "bad"}, "/s", "bad", ("a",))]))[0] is not None
    finally:
        await asyncio.to_thread(log.close)
