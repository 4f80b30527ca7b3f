"""The SubscriptionStore contract, run against every storage backend and the in-memory double:
transactional writes, revisions and preconditions, query filters, opaque stable cursors, and a
change feed published before each write returns."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cebroker.errors import Conflict, NotFound, PreconditionFailed, QuotaExceeded
from cebroker.storage import (
    ChangeKind,
    InvalidCursor,
    SubscriptionChange,
    SubscriptionQuery,
    SubscriptionStore,
)
from cebroker.storage.memory import MemorySubscriptionStore
from cebroker.subscription import RetiredSecret, Subscription
from storage.support import BACKEND_PARAMS, STORAGES, opened

#: The storage backends plus the in-memory test double.
STORES = [*BACKEND_PARAMS, "memory"]


def make(sid: str, **kw: Any) -> Subscription:
    return dataclasses.replace(Subscription(id=sid, protocol="HTTP", sink=f"http://127.0.0.1:9/{sid}"), **kw)


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SubscriptionStore]:
    if request.param == "memory":
        yield MemorySubscriptionStore()
        return
    async with opened(STORAGES[request.param](request, tmp_path)) as storage:
        yield storage.subscriptions


@pytest.mark.parametrize("backend", STORES)
def test_satisfies_the_protocol(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> None:
    subject = (
        MemorySubscriptionStore()
        if backend == "memory"
        else STORAGES[backend](request, tmp_path).subscriptions
    )
    assert isinstance(subject, SubscriptionStore)


async def test_create_get_roundtrip_keeps_every_field_and_secret(store: SubscriptionStore) -> None:
    """Stored JSON includes secrets (delivery needs them); revision starts at 1."""
    sub = make(
        "a",
        source="/s",
        types=("t1", "t2"),
        config={"k": 1},
        filters=({"exact": {"type": "t1"}},),
        protocolsettings={"method": "POST"},
        sinkcredential={"credentialtype": "PLAIN", "identity": "u", "secret": "pw"},
    )
    created = await store.create(sub)
    assert created.revision == 1
    got = await store.get("a")
    assert got == created
    assert got is not None
    assert got.sinkcredential == {"credentialtype": "PLAIN", "identity": "u", "secret": "pw"}
    assert await store.get("missing") is None


async def test_create_duplicate_id_conflicts_and_stores_nothing(store: SubscriptionStore) -> None:
    await store.create(make("a"))
    with pytest.raises(Conflict):
        await store.create(make("a", sink="http://other/"))
    assert [s.sink for s in await store.all()] == ["http://127.0.0.1:9/a"]


async def test_replace_bumps_revision_and_checks_expected(store: SubscriptionStore) -> None:
    await store.create(make("a", types=("old",)))
    replaced = await store.replace(make("a", types=("new",)), expected_revision=1)
    assert replaced.revision == 2
    with pytest.raises(PreconditionFailed):
        await store.replace(make("a"), expected_revision=1)
    with pytest.raises(NotFound):
        await store.replace(make("zzz"))
    # the types side table follows the replace
    assert (await store.query(SubscriptionQuery(type="old"))).items == []
    assert [s.id for s in (await store.query(SubscriptionQuery(type="new"))).items] == ["a"]


async def test_delete_returns_old_and_checks_expected(store: SubscriptionStore) -> None:
    await store.create(make("a", types=("t",)))
    with pytest.raises(PreconditionFailed):
        await store.delete("a", expected_revision=7)
    gone = await store.delete("a", expected_revision=1)
    assert gone.id == "a"
    assert await store.get("a") is None
    with pytest.raises(NotFound):
        await store.delete("a")
    assert (await store.query(SubscriptionQuery(type="t"))).items == []


async def test_query_filters_combine(store: SubscriptionStore) -> None:
    await store.create(make("h1", source="/a", types=("x", "y")))
    await store.create(make("h2", source="/b", types=("y",)))
    await store.create(make("m1", protocol="MQTT5", sink="mqtt://h:1883", source="/a"))

    async def ids(**kw: Any) -> list[str]:
        return [s.id for s in (await store.query(SubscriptionQuery(**kw))).items]

    assert await ids() == ["h1", "h2", "m1"]
    assert await ids(protocol="HTTP") == ["h1", "h2"]
    assert await ids(source="/a") == ["h1", "m1"]
    assert await ids(type="y") == ["h1", "h2"]
    assert await ids(type="x", source="/a") == ["h1"]
    assert await ids(sink="mqtt://h:1883") == ["m1"]
    assert await ids(protocol="NATS") == []


async def test_pagination_is_stable_and_cursor_is_opaque(store: SubscriptionStore) -> None:
    for i in range(7):
        await store.create(make(f"s{i}"))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.query(SubscriptionQuery(limit=3, cursor=cursor))
        seen += [s.id for s in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        assert not page.next_cursor.isdigit()  # opaque, not the raw sequence number
        cursor = page.next_cursor
    assert seen == [f"s{i}" for i in range(7)]
    assert pages == 3
    # replacing keeps the creation order
    await store.replace(make("s0", types=("t",)))
    assert [s.id for s in (await store.query(SubscriptionQuery(limit=2))).items] == ["s0", "s1"]


async def test_exact_page_boundary_has_no_next_cursor(store: SubscriptionStore) -> None:
    for i in range(4):
        await store.create(make(f"s{i}"))
    first = await store.query(SubscriptionQuery(limit=2))
    assert first.next_cursor is not None
    second = await store.query(SubscriptionQuery(limit=2, cursor=first.next_cursor))
    assert [s.id for s in second.items] == ["s2", "s3"]
    assert second.next_cursor is None


@pytest.mark.parametrize("cursor", ["", "%%%", "bm9wZQ", "c2VxOi0x", "c2VxOjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5"])
async def test_foreign_cursor_is_rejected(store: SubscriptionStore, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        await store.query(SubscriptionQuery(cursor=cursor))


async def test_change_feed_publishes_before_write_returns(store: SubscriptionStore) -> None:
    """Each committed write is on the feed when its call returns, in commit order."""
    seen: list[SubscriptionChange] = []
    unsubscribe = store.changes.subscribe(seen.append)
    await store.create(make("a"))
    assert [(c.kind, c.subscription.revision) for c in seen] == [(ChangeKind.CREATED, 1)]
    await store.replace(make("a", source="/x"))
    updated = seen[-1]
    assert updated.kind is ChangeKind.UPDATED
    assert updated.subscription.source == "/x"
    await store.delete("a")
    deleted = seen[-1]
    assert deleted.kind is ChangeKind.DELETED
    assert deleted.subscription.revision == 2
    with pytest.raises(NotFound):
        await store.delete("a")
    assert len(seen) == 3  # failed writes publish nothing
    unsubscribe()
    await store.create(make("b"))
    assert len(seen) == 3


async def test_concurrent_writes_publish_in_commit_order(store: SubscriptionStore) -> None:
    seen: list[str] = []
    store.changes.subscribe(lambda c: seen.append(c.subscription.id))
    await asyncio.gather(*(store.create(make(f"c{i}")) for i in range(20)))
    assert seen == [s.id for s in await store.all()]


async def test_pages_stay_consistent_under_concurrent_deletes(store: SubscriptionStore) -> None:
    """The cursor is a position in creation order: deleting rows between pages neither repeats
    nor skips the rows that remain."""
    for i in range(6):
        await store.create(make(f"s{i}"))
    first = await store.query(SubscriptionQuery(limit=2))
    assert [s.id for s in first.items] == ["s0", "s1"]
    await store.delete("s1")  # already seen
    await store.delete("s2")  # not yet seen
    await store.create(make("s6"))
    rest = await store.query(SubscriptionQuery(limit=10, cursor=first.next_cursor))
    assert [s.id for s in rest.items] == ["s3", "s4", "s5", "s6"]


async def test_limit_below_one_is_refused(store: SubscriptionStore) -> None:
    with pytest.raises(ValueError, match="at least one"):
        await store.query(SubscriptionQuery(limit=0))


async def test_refused_writes_change_nothing(store: SubscriptionStore) -> None:
    """Every refused write (conflict, stale revision, unknown id) leaves the stored state and
    the feed exactly as they were."""
    await store.create(make("a", types=("t",), source="/s"))
    before = await store.all()
    seen: list[SubscriptionChange] = []
    store.changes.subscribe(seen.append)
    with pytest.raises(Conflict):
        await store.create(make("a", sink="http://other/"))
    with pytest.raises(PreconditionFailed):
        await store.replace(make("a", types=("u",)), expected_revision=5)
    with pytest.raises(PreconditionFailed):
        await store.delete("a", expected_revision=5)
    with pytest.raises(NotFound):
        await store.replace(make("b"))
    assert await store.all() == before
    assert [s.id for s in (await store.query(SubscriptionQuery(type="t"))).items] == ["a"]
    assert (await store.query(SubscriptionQuery(type="u"))).items == []
    assert seen == []


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_survives_close_and_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """What a write stored is there, revisions and creation order included, after a reopen."""
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        await storage.subscriptions.create(make("first", types=("t",)))
        await storage.subscriptions.create(make("second"))
        await storage.subscriptions.replace(make("first", types=("t", "u")))
        page = await storage.subscriptions.query(SubscriptionQuery(limit=1))
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        store = storage.subscriptions
        assert [(s.id, s.revision) for s in await store.all()] == [("first", 2), ("second", 1)]
        assert [s.id for s in (await store.query(SubscriptionQuery(type="u"))).items] == ["first"]
        # a cursor issued before the reopen still resumes where it stopped
        rest = await store.query(SubscriptionQuery(limit=5, cursor=page.next_cursor))
        assert [s.id for s in rest.items] == ["second"]


async def test_every_change_has_the_next_version(store: SubscriptionStore) -> None:
    seen: list[int] = []
    store.changes.subscribe(lambda change: seen.append(store.version))
    start = store.version
    await store.create(make("v"))
    await store.replace(make("v", sink="http://127.0.0.1:9/w"))
    await store.delete("v")
    await store.catch_up()  # nothing left to publish
    assert seen == [start + 1, start + 2, start + 3]
    assert store.version == start + 3


async def test_tenant_and_webhook_secrets_are_kept(store: SubscriptionStore) -> None:
    retired = (RetiredSecret("whsec_old", 1234.5),)
    sub = make("a", tenant="acme", webhook_secret="whsec_new", retired_secrets=retired)
    await store.create(sub)
    got = await store.get("a")
    assert got is not None
    assert (got.tenant, got.webhook_secret, got.retired_secrets) == ("acme", "whsec_new", retired)
    assert [s.tenant for s in await store.all()] == ["acme"]


async def test_query_by_tenant_pages_through_that_tenant_only(store: SubscriptionStore) -> None:
    for n in range(7):
        await store.create(make(f"s{n}", tenant="acme" if n % 2 else "globex", types=("t",)))
    await store.create(make("none"))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.query(SubscriptionQuery(tenant="acme", limit=2, cursor=cursor))
        seen.extend(s.id for s in page.items)
        assert all(s.tenant == "acme" for s in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["s1", "s3", "s5"]
    typed = await store.query(SubscriptionQuery(tenant="globex", type="t"))
    assert [s.id for s in typed.items] == ["s0", "s2", "s4", "s6"]
    everyone = await store.query(SubscriptionQuery(limit=100))
    assert len(everyone.items) == 8


async def test_replace_keeps_the_stored_tenant(store: SubscriptionStore) -> None:
    await store.create(make("a", tenant="acme"))
    replaced = await store.replace(make("a", tenant="globex", types=("x",)))
    assert replaced.tenant == "acme"
    got = await store.get("a")
    assert got is not None
    assert got.tenant == "acme"
    page = await store.query(SubscriptionQuery(tenant="globex"))
    assert page.items == []


async def test_tenant_quota_is_counted_with_the_create(store: SubscriptionStore) -> None:
    await store.create(make("a1", tenant="acme"), max_per_tenant=2)
    await store.create(make("g1", tenant="globex"), max_per_tenant=2)
    # Concurrent creates: exactly one of them finds room.
    results = await asyncio.gather(
        *(store.create(make(f"a{n}", tenant="acme"), max_per_tenant=2) for n in range(2, 6)),
        return_exceptions=True,
    )
    assert sum(1 for r in results if isinstance(r, Subscription)) == 1
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert len(refused) == 3
    assert "tenant 'acme' holds 2 subscriptions" in str(refused[0])
    assert len((await store.query(SubscriptionQuery(tenant="acme"))).items) == 2
    # No tenant, no quota; a delete makes room.
    await store.create(make("free"), max_per_tenant=1)
    await store.delete("a1")
    await store.create(make("a9", tenant="acme"), max_per_tenant=2)
