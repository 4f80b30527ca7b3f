"""What only the SQLite backend promises: one file in WAL mode created on first use, versioned
schemas (a file of the previous release opens without loss, a newer one is refused), one
process per file, the durability policy, reads that do not queue behind the writer, and sqlite3
errors translated with their cause."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from cebroker.storage import (
    Incoming,
    SchemaTooNew,
    StorageInUse,
    StorageUnavailable,
    SubscriptionQuery,
)
from cebroker.storage.sqlite import SqliteStorage
from cebroker.storage.sqlite.migrations import latest
from cebroker.subscription import Subscription
from storage.support import opened

PREVIOUS = Path(__file__).with_name("previous_schema.sql")
EVENT = {"specversion": "1.0", "id": "e1", "source": "/s", "type": "t", "data": {"n": 1}}


def versions(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as raw:
        return dict(raw.execute("SELECT component, version FROM schema_versions").fetchall())


async def test_creates_the_file_in_wal_mode_with_every_schema(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "broker.db"
    async with opened(SqliteStorage(path)):
        assert path.exists()
        assert path.with_name("broker.db.lock").exists()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert versions(path) == latest() == {"storage": 1, "subscriptions": 2, "deliveries": 5, "registry": 1}


async def test_a_file_of_the_previous_release_opens_without_loss(tmp_path: Path) -> None:
    """A file whose tables were created by the previous release's statements (only the
    subscription store recorded a version) keeps every row: subscriptions, pending deliveries,
    dead letters, counts, de-duplication keys and registry entities."""
    path = tmp_path / "old.db"
    now = time.time()
    sub = Subscription(id="s1", protocol="HTTP", sink="http://127.0.0.1:9/", types=("t",))
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA journal_mode=WAL")
        raw.executescript(PREVIOUS.read_text())
        raw.execute(
            "INSERT INTO subscriptions (id, protocol, sink, source, revision, doc) VALUES (?, ?, ?, ?, ?, ?)",
            ("s1", "HTTP", sub.sink, None, 3, json.dumps(sub.to_json(include_secrets=True))),
        )
        raw.execute("INSERT INTO subscription_types VALUES ('t', 1)")
        raw.execute("INSERT INTO pipeline_events VALUES (7, ?, ?)", (json.dumps(EVENT), now))
        raw.execute("INSERT INTO pipeline_seen VALUES ('/s', 'e1', ?)", (now,))
        raw.execute(
            "INSERT INTO pipeline_deliveries VALUES (11, 7, 's1', 2, ?, ?, 'timeout')", (now - 1, now)
        )
        raw.execute(
            "INSERT INTO pipeline_deadletters VALUES (1, 's1', ?, '500', 'oops', 5, 'gave up', ?, ?)",
            (json.dumps({**EVENT, "id": "e0"}), now, now),
        )
        raw.execute("INSERT INTO pipeline_stats VALUES ('s1', 4, 6, 1, 'gave up', ?)", (now,))
        raw.execute(
            "INSERT INTO xreg_entity VALUES ('/', '', '', 'registry', '', 1, ?, NULL)",
            (json.dumps({"registryid": "old", "epoch": 3}),),
        )
    assert versions(path) == {"subscriptions": 1}
    async with opened(SqliteStorage(path)) as storage:
        assert versions(path) == latest()
        stored = await storage.subscriptions.get("s1")
        assert stored is not None
        assert (stored.revision, stored.types) == (3, ("t",))
        page = await storage.subscriptions.query(SubscriptionQuery(type="t"))
        assert [s.id for s in page.items] == ["s1"]
        rows, _ = await storage.deliveries.due("s1", 10)
        assert [(r.id, r.event_seq, r.attempts) for r in rows] == [(11, 7, 2)]
        assert json.loads(rows[0].body or "") == EVENT
        (dead,) = await storage.deliveries.dead_letters("s1", 0, 10)
        assert (dead.event["id"], dead.status, dead.last_error) == ("e0", "500", "gave up")
        status = await storage.deliveries.status("s1")
        assert (status.delivered, status.failed, status.pending) == (4, 6, 1)
        assert await storage.deliveries.append([Incoming(EVENT, "/s", "e1", ("s1",))]) == [None]
        (fresh,) = await storage.deliveries.append([Incoming({**EVENT, "id": "e2"}, "/s", "e2", ("s1",))])
        assert fresh is not None
        assert (fresh.seq, fresh.deliveries) == (8, [(12, "s1")])  # ids continue after the old ones
        root = await storage.registry.read(lambda rows: rows.get("/"))
        assert root is not None
        assert root.attrs == {"registryid": "old", "epoch": 3}


@pytest.mark.parametrize("component", ["storage", "subscriptions", "deliveries", "registry"])
async def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path, component: str) -> None:
    path = tmp_path / "future.db"
    async with opened(SqliteStorage(path)):
        pass
    # another component is a version behind: it is not migrated either
    behind = "registry" if component != "registry" else "storage"
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_versions SET version = 99 WHERE component = ?", (component,))
        raw.execute("DELETE FROM schema_versions WHERE component = ?", (behind,))
    before = versions(path)
    storage = SqliteStorage(path)
    with pytest.raises(SchemaTooNew, match=f"{component} schema version 99 is newer than this broker's"):
        storage.prepare()
    assert versions(path) == before
    # the refusal released the lock: a broker of the right release could open the file
    with sqlite3.connect(path) as raw:
        for name, version in latest().items():
            raw.execute("UPDATE schema_versions SET version = ? WHERE component = ?", (version, name))
    async with opened(SqliteStorage(path)):
        assert versions(path) == latest()


async def test_an_unknown_component_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        raw.execute("INSERT INTO schema_versions VALUES ('tenants', 1)")
    with pytest.raises(SchemaTooNew, match="'tenants'"):
        SqliteStorage(path).prepare()


async def test_not_a_database_is_refused_with_its_cause(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    storage = SqliteStorage(path)
    with pytest.raises(StorageUnavailable) as info:
        await storage.open()
    assert info.value.cause == "not a database file"
    with pytest.raises(StorageUnavailable, match="closed"):
        await storage.subscriptions.get("x")  # never opened
    with pytest.raises(StorageUnavailable, match="closed"):
        await storage.deliveries.append([Incoming(EVENT, "/s", "e1", ())])
    await storage.close()  # closing what never opened is harmless


async def test_one_storage_per_file(tmp_path: Path) -> None:
    """A second storage on the same file is refused while the first holds it, naming the file
    and the holder; the lock goes with the first one's close."""
    path = tmp_path / "broker.db"
    first = SqliteStorage(path)
    first.prepare()
    holder = json.loads(path.with_name("broker.db.lock").read_text())
    assert (holder["pid"], holder["host"]) == (os.getpid(), socket.gethostname())
    with pytest.raises(StorageInUse) as info:
        SqliteStorage(path).prepare()
    assert str(path) in str(info.value)
    assert f"pid {os.getpid()} on {socket.gethostname()}, since {holder['since']}" in str(info.value)
    await first.open()
    with pytest.raises(StorageInUse):
        await SqliteStorage(path).open()
    await first.close()
    async with opened(SqliteStorage(path)):
        pass


async def test_durability_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes a client or upstream is told about return only once the WAL holding their commit
    is flushed to disk (after the commit, before the answer); bookkeeping whose loss only
    repeats work waits for no flush when it is alone. Every commit is made without SQLite's own
    flush (the writer's syncer flushes instead, off the write lock)."""
    timeline: list[tuple[str, str]] = []
    modes: set[str] = set()

    class Recording(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            if "writer" in threading.current_thread().name:
                if sql.startswith("PRAGMA synchronous="):
                    modes.add(sql.split("=")[1])
                elif sql == "COMMIT":
                    timeline.append(("commit", label[0]))
            return super().execute(sql, parameters)

    flush = os.fdatasync

    def recording_flush(fd: int) -> None:
        assert threading.current_thread().name == "cebroker-storage-sync"
        flush(fd)
        timeline.append(("flush", ""))

    monkeypatch.setattr(os, "fdatasync", recording_flush)
    label = ["open"]
    async with opened(SqliteStorage(tmp_path / "b.db", connection_factory=Recording)) as storage:

        async def commit(name: str, call: Awaitable[object]) -> None:
            label[0] = name
            await call
            timeline.append(("returned", name))

        sub = Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/")
        log = storage.deliveries
        await commit("subscription", storage.subscriptions.create(sub))
        await commit("append", log.append([Incoming(EVENT, "/s", "e1", ("s",))]))
        label[0] = "due"
        (row,), _ = await log.due("s", 1)
        await commit("reschedule", log.reschedule(row, 1, time.time() - 1, "x"))
        await commit("dead_letter", log.dead_letter(row, b"{}", 2, "x", None, None))
        await commit("redrive", log.redrive("s", None))
        label[0] = "due"
        (row,), _ = await log.due("s", 1)
        await commit("complete", log.complete([(row.id, row.event_seq, "s")]))
        await commit("purge_seen", log.purge_seen())
        await commit("registry", storage.registry.write(lambda rows: rows.count("/", "x")))
        await commit("forget", log.forget("s"))
    flushed: dict[str, set[bool]] = {}
    for at, (kind, name) in enumerate(timeline):
        if kind != "returned":
            continue
        committed = max(i for i, (k, n) in enumerate(timeline[:at]) if k == "commit" and n == name)
        flushed.setdefault(name, set()).add(any(k == "flush" for k, _ in timeline[committed:at]))
    assert flushed == {
        "subscription": {True},
        "append": {True},
        "reschedule": {False},
        "dead_letter": {False},
        "redrive": {True},
        "complete": {False},
        "purge_seen": {False},
        "registry": {True},
        "forget": {True},
    }
    # The start-up's own transaction commits with SQLite's flush; every later one without.
    assert modes == {"FULL", "NORMAL"}
    assert ("commit", "open") in timeline


async def test_reads_do_not_queue_behind_the_writer(tmp_path: Path) -> None:
    """While the writer is held up (a long transaction), API reads are still answered (the
    dispatcher's reads are not API reads: they stay in order with its writes)."""
    sqlite = SqliteStorage(tmp_path / "b.db")
    async with opened(sqlite) as storage:
        await storage.subscriptions.create(Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/"))
        gate = threading.Event()
        held = asyncio.ensure_future(sqlite._db.writer.run(lambda conn: gate.wait(20)))
        try:
            reads = asyncio.gather(
                storage.subscriptions.get("s"),
                storage.subscriptions.query(SubscriptionQuery()),
                storage.deliveries.status("s"),
                storage.deliveries.dead_letters("s", 0, 10),
                storage.registry.read(lambda rows: rows.get("/")),
            )
            got, page, status, dead, root = await asyncio.wait_for(reads, 10)
            assert got is not None
            assert [s.id for s in page.items] == ["s"]
            assert (status.pending, dead, root) == (0, [], None)
            assert not held.done()
        finally:
            gate.set()
            await held


async def test_due_leaves_out_the_deliveries_held_in_memory(tmp_path: Path) -> None:
    """The dispatcher's deliveries in memory stay due in the log until their outcome is written;
    a read of due deliveries leaves out those it names (before their events are read), and the
    rest come oldest first, within the limit, with when more are due."""
    async with opened(SqliteStorage(tmp_path / "b.db")) as storage:
        await storage.subscriptions.create(Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/x"))
        log = storage.deliveries
        await log.append([Incoming({**EVENT, "id": f"e{n}"}, "/s", f"e{n}", ("s",)) for n in range(6)])
        everything, _ = await log.due("s", 10)
        ids = [r.id for r in everything]
        assert len(ids) == 6
        held = {ids[0], ids[2], ids[3]}
        rows, later = await log.due("s", 10, held=held)
        assert [r.id for r in rows] == [ids[1], ids[4], ids[5]]
        assert [json.loads(r.body or "")["id"] for r in rows] == ["e1", "e4", "e5"]
        assert later is None  # nothing else waits but what is held
        rows, later = await log.due("s", 2, held=held)
        assert [r.id for r in rows] == [ids[1], ids[4]]
        assert later is not None  # more is due now
        assert [r.id for r in (await log.due("s", 10, held=set(ids)))[0]] == []


async def test_the_writer_keeps_temporary_structures_in_memory(tmp_path: Path) -> None:
    """The writer's statement journals and transient tables are in memory (``temp_store`` 2):
    on disk, SQLite's default, every group commit created, unlinked and closed a file in the
    temporary directory."""
    sqlite = SqliteStorage(tmp_path / "b.db")
    async with opened(sqlite) as storage:
        await storage.subscriptions.create(Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/"))
        event = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}
        await storage.deliveries.append([Incoming(event, "/s", "1", ("s",))])
        mode = await sqlite._db.writer.run(lambda conn: conn.execute("PRAGMA temp_store").fetchone()[0])
        assert mode == 2
