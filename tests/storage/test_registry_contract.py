"""The RegistryStore contract, run against every storage backend: the row API through
``read``/``write``, sequence order, case-insensitive ids within a collection, subtrees, a
raising write that leaves nothing behind, one consistent snapshot per read, and durability."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cebroker.storage import EntityClash, RegistryReader, RegistryRows, RegistryStore, Row, Storage
from storage.support import STORAGES, opened


def group(gid: str, **attrs: object) -> Row:
    return Row(f"/messagegroups/{gid}", "/", "messagegroups", "group", gid, dict(attrs))


def message(gid: str, mid: str) -> Row:
    return Row(f"/messagegroups/{gid}/messages/{mid}", f"/messagegroups/{gid}", "messages", "resource", mid)


def version(gid: str, mid: str, vid: str, doc: bytes | None = None) -> Row:
    res = f"/messagegroups/{gid}/messages/{mid}"
    return Row(f"{res}/versions/{vid}", res, "versions", "version", vid, {"versionid": vid}, doc)


def tree(rows: RegistryRows) -> None:
    rows.put(Row("/", "", "", "registry", "", {"epoch": 1}))
    rows.put(group("a", epoch=1))
    rows.put(message("a", "m1"))
    rows.put(version("a", "m1", "1", b"\x00doc"))
    rows.put(group("b"))
    rows.put(message("a", "m2"))


def xids(found: list[Row]) -> list[str]:
    return [r.xid for r in found]


def test_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage.registry, RegistryStore)


async def test_rows_read_back_in_creation_order(storage: Storage) -> None:
    store = storage.registry
    await store.write(tree)

    def check(rows: RegistryReader) -> None:
        got = rows.get("/messagegroups/a/messages/m1/versions/1")
        assert got is not None
        assert (got.kind, got.eid, got.attrs, got.doc) == ("version", "1", {"versionid": "1"}, b"\x00doc")
        assert rows.get("/messagegroups/A") is None  # get is exact
        sib = rows.sibling("/", "messagegroups", "A")
        assert sib is not None
        assert sib.xid == "/messagegroups/a"
        assert rows.sibling("/", "schemagroups", "a") is None
        assert xids(rows.children("/", "messagegroups")) == ["/messagegroups/a", "/messagegroups/b"]
        assert xids(rows.children("/messagegroups/a", "messages")) == [
            "/messagegroups/a/messages/m1",
            "/messagegroups/a/messages/m2",
        ]
        assert rows.count("/messagegroups/a", "messages") == 2
        assert rows.count("/messagegroups/b", "messages") == 0
        assert xids(rows.subtree("/messagegroups/a")) == [
            "/messagegroups/a",
            "/messagegroups/a/messages/m1",
            "/messagegroups/a/messages/m1/versions/1",
            "/messagegroups/a/messages/m2",
        ]
        assert len(rows.subtree("/")) == 6
        assert xids(rows.rows_of_kind("resource")) == [
            "/messagegroups/a/messages/m1",
            "/messagegroups/a/messages/m2",
        ]
        assert xids(rows.rows_of_kind("group", "messagegroups")) == ["/messagegroups/a", "/messagegroups/b"]
        assert rows.rows_of_kind("group", "schemagroups") == []

    await store.read(check)


async def test_put_replaces_by_xid_and_keeps_the_place(storage: Storage) -> None:
    store = storage.registry
    await store.write(tree)

    def replace(rows: RegistryRows) -> Row:
        row = rows.get("/messagegroups/a")
        assert row is not None
        assert row.seq > 0
        row.attrs = {"epoch": 2, "description": "new"}
        return rows.put(row)

    replaced = await store.write(replace)
    children = await store.read(lambda rows: rows.children("/", "messagegroups"))
    assert xids(children) == ["/messagegroups/a", "/messagegroups/b"]
    assert children[0].attrs == {"epoch": 2, "description": "new"}
    assert children[0].seq == replaced.seq
    fresh = await store.write(lambda rows: rows.put(group("c")))
    assert fresh.seq > max(r.seq for r in children)


async def test_delete_subtree_takes_exactly_the_subtree(storage: Storage) -> None:
    store = storage.registry
    await store.write(tree)
    await store.write(lambda rows: rows.put(group("a2")))  # shares the prefix "/messagegroups/a"
    assert await store.write(lambda rows: rows.delete_subtree("/messagegroups/a")) == 4
    left = await store.read(lambda rows: rows.subtree("/"))
    assert xids(left) == ["/", "/messagegroups/b", "/messagegroups/a2"]
    assert await store.write(lambda rows: rows.delete_subtree("/messagegroups/zzz")) == 0


async def test_an_id_differing_only_in_case_clashes(storage: Storage) -> None:
    store = storage.registry
    await store.write(tree)
    with pytest.raises(EntityClash) as info:
        await store.write(lambda rows: rows.put(Row("/messagegroups/A", "/", "messagegroups", "group", "A")))
    assert info.value.xid == "/messagegroups/A"
    # the same id in another collection is another entity
    await store.write(lambda rows: rows.put(Row("/schemagroups/A", "/", "schemagroups", "group", "A")))
    assert await store.read(lambda rows: rows.count("/", "schemagroups")) == 1


async def test_a_raising_write_leaves_nothing(storage: Storage) -> None:
    """Whatever the function wrote before it raised is rolled back, and its error propagates
    unchanged; the next write works."""
    store = storage.registry
    await store.write(tree)
    before = await store.read(lambda rows: rows.subtree("/"))

    class Refused(Exception):
        pass

    def half_done(rows: RegistryRows) -> None:
        rows.put(group("c"))
        rows.delete_subtree("/messagegroups/a")
        row = rows.get("/")
        assert row is not None
        row.attrs = {"epoch": 99}
        rows.put(row)
        raise Refused("no")

    with pytest.raises(Refused):
        await store.write(half_done)
    assert await store.read(lambda rows: rows.subtree("/")) == before
    await store.write(lambda rows: rows.put(group("c")))
    assert await store.read(lambda rows: rows.count("/", "messagegroups")) == 3


async def test_a_read_is_one_snapshot(storage: Storage) -> None:
    """A write that commits while a read runs is not seen by that read, only by the next one."""
    store = storage.registry
    await store.write(tree)
    inside = threading.Event()
    resume = threading.Event()

    def slow_read(rows: RegistryReader) -> tuple[int, int]:
        first = rows.count("/", "messagegroups")
        inside.set()
        assert resume.wait(10)
        return first, rows.count("/", "messagegroups")

    reading = asyncio.ensure_future(store.read(slow_read))
    assert await asyncio.to_thread(inside.wait, 10)
    await asyncio.wait_for(store.write(lambda rows: rows.put(group("c"))), 10)  # a read does not block it
    resume.set()
    assert await reading == (2, 2)
    assert await store.read(lambda rows: rows.count("/", "messagegroups")) == 3


async def test_rows_survive_close_and_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        await storage.registry.write(tree)
        before = await storage.registry.read(lambda rows: rows.subtree("/"))
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        assert await storage.registry.read(lambda rows: rows.subtree("/")) == before
        fresh = await storage.registry.write(lambda rows: rows.put(group("c")))
        assert fresh.seq > max(r.seq for r in before)
