"""The delivery rules written twice, pinned on every backend.

A confirmation and a dead letter each keep several books at once, and each is written twice:
in Python for SQLite (``storage/sqlite/``: ``rows.py``, ``outcomes.py``, ``ordering.py``) and in
the server functions for PostgreSQL (``cebroker_complete`` and ``cebroker_release_groups`` in
``storage/postgres/sql/deliveries/``, the statements of ``storage/postgres/outcomes.py`` and
``rows.py``). docs/architecture.md lists where each rule lives. These tests hold every book of
one call at once, so that the two copies cannot drift apart unseen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cebroker.storage import Incoming, Pending, Storage
from cebroker.storage.archive import Archived, ReplayRequest
from storage.support import STORAGES, opened

HOUR = 3600.0


def incoming(n: int, subscriptions: tuple[str, ...], group: str | None = None) -> Incoming:
    event = {"specversion": "1.0", "id": str(n), "source": "/s", "type": "t"}
    groups: tuple[str | None, ...] = (group,) * len(subscriptions) if group is not None else ()
    return Incoming(event, "/s", str(n), subscriptions, groups)


def ids(rows: list[Pending]) -> list[str]:
    return [json.loads(r.body or "")["id"] for r in rows]


def every(events: Sequence[Archived]) -> list[tuple[int, str | None]]:
    return [(e.seq, None) for e in events]


@pytest.fixture
async def kept(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Any:
    """A storage of ``backend`` keeping events for an hour."""
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR)) as storage:
        yield storage


async def test_one_confirmation_keeps_every_book(storage: Storage) -> None:
    """``complete`` of a batch: the deliveries leave, each subscription counts them delivered,
    the backlog shrinks, an event goes with its last delivery only, and the next delivery of
    each ordering group is due at once."""
    log = storage.deliveries
    await log.append([incoming(1, ("a", "b"), "k"), incoming(2, ("a",), "k"), incoming(3, ("a",))])
    rows_a, _ = await log.due("a", 10)
    rows_b, _ = await log.due("b", 10)
    assert (ids(rows_a), ids(rows_b)) == (["1", "3"], ["1"])
    await log.complete([(r.id, r.event_seq, r.subscription) for r in rows_a])
    assert (await log.status("a")).delivered == 2
    assert (await log.status("b")).delivered == 0
    assert {k: v[0] for k, v in (await log.backlog()).items()} == {"a": 1, "b": 1}
    after, _ = await log.due("a", 10)
    assert ids(after) == ["2"]  # k's next one, released by the confirmation
    # event 1 is still needed by b: b's delivery, tried again, reads it back whole
    await log.reschedule(rows_b[0], 1, time.time() - 1, "503")
    again, _ = await log.due("b", 10)
    assert ids(again) == ["1"]
    await log.complete([(r.id, r.event_seq, r.subscription) for r in again + after])
    assert await log.backlog() == {}
    assert ((await log.status("a")).delivered, (await log.status("b")).delivered) == (3, 1)


async def test_one_dead_letter_keeps_every_book(storage: Storage) -> None:
    """``dead_letter``: the delivery leaves, the failure and the dead letter are counted with the
    last error, and the next delivery of its ordering group is due at once."""
    log = storage.deliveries
    await log.append([incoming(1, ("a",), "k"), incoming(2, ("a",), "k")])
    (first,), _ = await log.due("a", 10)
    await log.dead_letter(first, b'{"id": "1"}', 4, "sink answered 410", "410", "gone")
    status = await log.status("a")
    assert (status.failed, status.deadlettered, status.deadlettered_total, status.pending) == (
        1,
        1,
        1,
        1,
    )
    assert status.last_error == "sink answered 410"
    (dead,) = await log.dead_letters("a", 0, 10)
    assert (dead.event["id"], dead.attempts, dead.status) == ("1", 4, "410")
    nxt, _ = await log.due("a", 10)
    assert ids(nxt) == ["2"]


async def test_the_archive_and_a_replay_count_what_a_confirmation_removes(kept: Storage) -> None:
    """With a retention, a confirmed event stays in the archive (and its size with it), and a
    replay's confirmed, failed and dead-lettered deliveries are counted on the replay."""
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(n, ("a",)) for n in range(3)])
    before = await archive.stats()
    rows, _ = await log.due("a", 10)
    await log.complete([(r.id, r.event_seq, r.subscription) for r in rows])
    after = await archive.stats()
    assert (after.events, after.bytes) == (before.events, before.bytes) == (3, before.bytes)
    assert before.bytes > 0
    request = ReplayRequest(id="r", subscription="a", since=0.0, until=time.time() + 1)
    await archive.create_replay(request)
    assert (await archive.queue("r", 10, 100, every)).queued == 3
    replayed, _ = await log.due("a", 10)
    assert {r.replay for r in replayed} == {"r"}
    await log.complete([(replayed[0].id, replayed[0].event_seq, "a")])
    await log.reschedule(replayed[1], 1, time.time() + HOUR, "503")
    await log.dead_letter(replayed[2], b"{}", 1, "410", "410", None)
    (state,) = await archive.replays("a")
    assert (state.delivered, state.failed, state.deadlettered, state.pending) == (1, 2, 1, 1)
    assert (await archive.stats()).events == 3  # dead-lettered or confirmed, archived events stay


async def test_one_tenant_cannot_suppress_another_tenants_event(storage: Storage) -> None:
    """Finding 7: a tenant publishes an event with another tenant's source and that tenant's next
    id first; the victim's own event with that id is still accepted and delivered, and each
    tenant's own repeat is still a duplicate (de-duplication is per publishing tenant)."""
    log = storage.deliveries
    event = {"specversion": "1.0", "id": "order-7", "source": "/victim/orders", "type": "t"}
    forged = Incoming({**event, "data": "forged"}, "/victim/orders", "order-7", ("sub",), tenant="mallory")
    real = Incoming(event, "/victim/orders", "order-7", ("sub",), tenant="victim")
    first, second = await log.append([forged]), await log.append([real])
    assert [first[0] is not None, second[0] is not None] == [True, True]  # different publishers
    assert await log.append([real]) == [None]  # the victim's repeat is a duplicate
    assert await log.append([forged]) == [None]  # and so is the forger's
    anonymous = Incoming(event, "/victim/orders", "order-7", ("sub",))
    assert (await log.append([anonymous]))[0] is not None  # no tenant: a publisher of its own
    rows, _ = await log.due("sub", 10)
    assert sorted(json.loads(r.body or "").get("data", "real") for r in rows) == ["forged", "real", "real"]


async def test_within_one_append_keys_are_per_tenant(storage: Storage) -> None:
    log = storage.deliveries
    event = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}
    done = await log.append(
        [
            Incoming(event, "/s", "1", ("a",), tenant="t1"),
            Incoming(event, "/s", "1", ("a",), tenant="t2"),
            Incoming(event, "/s", "1", ("a",), tenant="t1"),
        ]
    )
    assert [d is not None for d in done] == [True, True, False]
