"""PostgreSQL specifics: migrations raced by several instances starting at once, a database
written by a newer release, and an outage of the server (503 with the cause, not ready, and
recovery by itself once the server is back)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from servers.postgres import PostgresServer
from support.waiting import async_wait_for, async_wait_until

from cebroker.storage import Incoming, SchemaTooNew, StorageUnavailable
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.migrations import latest
from storage.support import claims_held, opened

pytestmark = pytest.mark.postgres


def test_several_prepares_racing_on_a_fresh_database_migrate_once(postgres_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def prepare() -> None:
        try:
            start.wait()
            PostgresStorage(postgres_url).prepare()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT component, version FROM schema_versions").fetchall()
        assert dict(rows) == latest()
        assert conn.execute("SELECT count(*) FROM pipeline_backlog").fetchone() == (64,)


def test_a_database_of_a_newer_release_is_refused_untouched(postgres_url: str) -> None:
    PostgresStorage(postgres_url).prepare()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE schema_versions SET version = 99 WHERE component = 'deliveries'")
    with pytest.raises(SchemaTooNew, match="deliveries schema version 99"):
        PostgresStorage(postgres_url).prepare()


def test_an_unreachable_server_is_storage_unavailable_without_the_password(tmp_path: Path) -> None:
    storage = PostgresStorage("postgresql://broker:hunter2@127.0.0.1:1/cebroker")
    with pytest.raises(StorageUnavailable) as info:
        storage.prepare()
    assert info.value.cause == "database connection lost"
    assert "hunter2" not in str(info.value)


@pytest.mark.slow
async def test_a_server_restart_is_503_then_recovers_by_itself(
    server_factory: Callable[..., PostgresServer],
) -> None:
    server = server_factory(PostgresServer)
    storage = PostgresStorage(server.create_database())
    async with opened(storage):
        log = storage.deliveries
        await log.append([Incoming({"id": "1"}, "/s", "1", ("a",))])
        server.stop()
        with pytest.raises(StorageUnavailable) as info:
            await log.append([Incoming({"id": "2"}, "/s", "2", ("a",))])
        assert info.value.retry_after <= 1.0
        assert not storage.health.ok
        assert storage.health.cause in ("database connection lost", "database restarting")
        server.start()
        await async_wait_for(
            lambda: storage.health.cause,
            lambda cause: cause is None,
            30,
            "the storage healthy again",
            interval=0.1,
        )
        (written,) = await log.append([Incoming({"id": "2"}, "/s", "2", ("a",))])
        assert written is not None
        assert await log.pending() == 2


async def test_two_instances_claim_each_delivery_once_and_see_each_others_changes(postgres_url: str) -> None:
    from cebroker.storage import IndexBehind, SubscriptionChange
    from cebroker.subscription import Subscription

    async with opened(PostgresStorage(postgres_url)) as one, opened(PostgresStorage(postgres_url)) as two:
        heard: list[SubscriptionChange] = []
        two.subscriptions.changes.subscribe(heard.append)
        matched_at = two.subscriptions.version
        await one.subscriptions.create(Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/"))
        # two matched before the change: its append is refused until it catches up
        with pytest.raises(IndexBehind):
            await two.deliveries.append([Incoming({"id": "x"}, "/s", "x", ())], version=matched_at)
        await two.subscriptions.catch_up()
        assert [c.subscription.id for c in heard] == ["s"]
        assert two.subscriptions.version == one.subscriptions.version
        await two.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(20)])
        # the same (source, id) from the other instance is a duplicate
        assert await one.deliveries.append([Incoming({"id": "3"}, "/s", "3", ("s",))]) == [None]
        (a, _), (b, _) = await asyncio.gather(one.deliveries.due("s", 15), two.deliveries.due("s", 15))
        assert len(a) + len(b) == 20
        assert not {r.id for r in a} & {r.id for r in b}


async def test_a_dead_instances_claims_are_taken_over_after_the_lease(postgres_url: str) -> None:
    from cebroker.storage import StorageOptions

    options = StorageOptions(lease=1.0)
    async with opened(PostgresStorage(postgres_url, options)) as alive:
        dead = PostgresStorage(postgres_url, options)
        await dead.open()
        await dead.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(3)])
        claimed, _ = await dead.deliveries.due("s", 10)
        assert len(claimed) == 3
        # the instance dies without a word: its heartbeat stops, its claims stay
        await dead._membership.stop_heartbeat()  # as a SIGKILL would
        heard: list[str | None] = []
        alive.claims.watch(heard.append)
        assert (await alive.deliveries.due("s", 10))[0] == []
        await async_wait_until(
            lambda: "s" in heard, 10, "the dead instance's claims on s offered to the live one"
        )
        taken, _ = await alive.deliveries.due("s", 10)
        assert sorted(r.id for r in taken) == sorted(r.id for r in claimed)
        assert not dead.claims.holds(claimed[0])


def _held(url: str) -> dict[str, tuple[int, int]]:
    """Per subscription: the claims count kept by the schema (:func:`claims_held`), and the
    claimed rows."""
    kept = claims_held(url)
    with psycopg.connect(url, autocommit=True) as conn:
        rows: dict[str, int] = {
            str(s): int(n)
            for s, n in conn.execute(
                "SELECT subscription, count(*) FROM pipeline_deliveries WHERE owner IS NOT NULL GROUP BY 1"
            )
        }
    return {sub: (kept.get(sub, 0), rows.get(sub, 0)) for sub in {*kept, *rows}}


async def test_the_count_of_claims_follows_every_claim_release_and_removal(postgres_url: str) -> None:
    from cebroker.storage import Limits, StorageOptions

    options = StorageOptions(lease=1.0)
    async with opened(PostgresStorage(postgres_url, options)) as one:
        two = PostgresStorage(postgres_url, options)
        await two.open()
        log = one.deliveries
        await log.append([Incoming({"id": str(n)}, "/s", str(n), ("a", "b")) for n in range(12)])
        a, _ = await log.due("a", 5, Limits(5))
        b, _ = await two.deliveries.due("b", 12, Limits(8))
        assert (len(a), len(b)) == (5, 8)  # b: held back by its concurrency
        assert _held(postgres_url) == {"a": (5, 5), "b": (8, 8)}
        # a full subscription gets nothing more, whoever asks
        assert (await log.due("a", 5, Limits(5)))[0] == []
        await log.complete([(d.id, d.event_seq, "a") for d in a[:2]])
        await log.reschedule(a[2], 1, 0.0, "boom")
        await log.dead_letter(a[3], b"{}", 1, "gone", None, None)
        assert _held(postgres_url) == {"a": (1, 1), "b": (8, 8)}
        more, _ = await log.due("a", 5, Limits(5))
        assert len(more) == 4  # the slots the removals and the retry freed
        # an instance that dies: its claims are freed, and counted out, by the reaper
        await two._membership.stop_heartbeat()
        await async_wait_until(
            lambda: _held(postgres_url)["b"] == (0, 0), 10, "the dead instance's claims counted out"
        )
        assert _held(postgres_url)["a"] == (5, 5)
        await log.forget("a")
        assert "a" not in _held(postgres_url)
        await two.close()


def test_claims_made_before_the_claims_count_are_counted_by_the_migration(postgres_url: str) -> None:
    from cebroker.storage.postgres.migrations import MIGRATIONS

    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the first release's schema
        for step in (MIGRATIONS["deliveries"][0], MIGRATIONS["storage"][0]):
            conn.execute(step.encode())
        conn.execute("CREATE TABLE schema_versions (component text PRIMARY KEY, version int NOT NULL)")
        conn.execute("INSERT INTO schema_versions VALUES ('deliveries', 1), ('storage', 1)")
        conn.execute(
            "INSERT INTO pipeline_deliveries"
            " (id, event_seq, subscription, attempts, next_at, first_at, owner) VALUES"
            " (1, 1, 'a', 0, 0, 0, 'gone'), (2, 2, 'a', 0, 0, 0, NULL), (3, 3, 'b', 0, 0, 0, 'x')"
        )
    PostgresStorage(postgres_url).prepare()
    assert _held(postgres_url) == {"a": (1, 1), "b": (1, 1)}


async def test_deliveries_the_ingesting_instance_leaves_unclaimed_are_announced(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as one, opened(PostgresStorage(postgres_url)) as two:
        heard: list[str | None] = []
        two.claims.watch(heard.append)
        await one.deliveries.append([Incoming({"id": "1"}, "/s", "1", ("s",))])
        await async_wait_until(lambda: "s" in heard, 10, "the other instance told of s")
        (claimed,), _ = await two.deliveries.due("s", 10)
        assert two.claims.holds(claimed)


async def test_an_instance_closing_right_after_an_append_still_announces_what_it_left(
    postgres_url: str,
) -> None:
    """The announcement waits a moment after the append; a close in that moment sends it at once
    (otherwise the others would find the deliveries only at their next rescan)."""
    async with opened(PostgresStorage(postgres_url)) as two:
        heard: list[str | None] = []
        two.claims.watch(heard.append)
        one = PostgresStorage(postgres_url)
        async with opened(one):
            await one.deliveries.append([Incoming({"id": "1"}, "/s", "1", ("s",))])
        await async_wait_until(lambda: "s" in heard, 10, "the other instance told of s")
        (claimed,), _ = await two.deliveries.due("s", 10)
        assert two.claims.holds(claimed)


async def test_a_task_cancelled_during_a_statement_ends_cancelled(postgres_url: str) -> None:
    """psycopg answers a cancellation with the server's "query canceled"; the task must still end
    cancelled (a loop that retries storage failures would otherwise outlive its cancellation:
    a storage that never closes)."""
    from cebroker.storage.base import StorageOptions
    from cebroker.storage.health import StorageHealth
    from cebroker.storage.postgres.database import Database

    health = StorageHealth("test")
    db = Database(postgres_url, "test", StorageOptions(), health)
    await db.open()
    try:

        async def sleep(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
            await conn.execute("SELECT pg_sleep(30)")

        async def retrying() -> None:
            while True:  # as the broker's background loops do
                try:
                    await db.run(sleep, durable=False)
                except StorageUnavailable:
                    continue

        task = asyncio.create_task(retrying())

        def sleeping() -> bool:
            with psycopg.connect(postgres_url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'"
                ).fetchone()
                return row is not None and row[0] == 1

        await async_wait_until(lambda: asyncio.to_thread(sleeping), message="the statement runs")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        assert health.ok  # a cancellation is no storage failure
    finally:
        await db.close()


@pytest.mark.parametrize("loop", ["_beat", "_reap"])
async def test_the_heartbeat_and_the_reaper_outlive_a_fault_of_their_own(
    postgres_url: str, loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A heartbeat or reaping that fails with anything but a storage error (a bug, a handler's
    fault) is logged with its traceback and tried again: a loop that ended would leave this
    instance's claims unused (no heartbeat) or dead instances' claims untaken (no reaper)."""
    from cebroker.storage import StorageOptions

    async with opened(PostgresStorage(postgres_url, StorageOptions(lease=1.0))) as storage:
        membership = storage._membership
        real = getattr(membership, loop)
        calls: list[int] = []

        async def faulty() -> object:
            calls.append(len(calls))
            if len(calls) == 1:
                raise RuntimeError("a fault of this process")
            return await real()

        setattr(membership, loop, faulty)
        await async_wait_until(lambda: len(calls) >= 3, 10, f"{loop} called again after its fault")
        await async_wait_until(lambda: membership.live, 10, "this instance's claims usable")
        faults = [r for r in caplog.records if r.exc_info and "a fault of this process" in str(r.exc_info[1])]
        assert len(faults) == 1, caplog.records


async def test_the_listener_listens_again_after_a_fault_of_its_own(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Anything but a driver error while listening is logged with its traceback and the listener
    connects again: a listener that ended would hear of no change or due delivery until the
    broker restarts."""
    from cebroker.storage.postgres.listener import DUE, Listener

    real = psycopg.AsyncConnection.notifies
    faults: list[int] = []

    def notifies(
        self: psycopg.AsyncConnection[Any], *, timeout: float | None = None, stop_after: int | None = None
    ) -> AsyncGenerator[psycopg.Notify]:
        if not faults:
            faults.append(1)
            raise RuntimeError("a fault of this process")
        return real(self, timeout=timeout, stop_after=stop_after)

    monkeypatch.setattr(psycopg.AsyncConnection, "notifies", notifies)
    listener = Listener(postgres_url, {})
    connects: list[int] = []
    heard: list[str] = []
    listener.on_connect(lambda: connects.append(1))
    listener.on(DUE, heard.append)
    listener.start()
    try:
        await async_wait_until(lambda: len(connects) >= 2, 10, "the listener connected again")

        def notify() -> None:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("SELECT pg_notify(%s, 'after the fault')", (DUE,))

        async def told() -> bool:
            await asyncio.to_thread(notify)
            return "after the fault" in heard

        await async_wait_until(told, 10, "a notification heard after the fault")
        assert [r for r in caplog.records if r.exc_info and "a fault of this process" in str(r.exc_info[1])]
    finally:
        await listener.stop()


def _owned(url: str, owner: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pipeline_deliveries WHERE owner = %s", (owner,)).fetchone()
    return int(row[0]) if row else 0


CLAIM = "SELECT * FROM cebroker_claim_many(%s, %s, %s, %s::int[], %s::int[], %s::float8[])"


async def test_a_claim_under_an_id_no_instance_has_claims_nothing(postgres_url: str) -> None:
    """An instance gives up an id when it takes a new one: a claim it had sent under the old one
    and that arrives after must not leave rows owned by an id that no instance will free."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        await storage.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(3)])
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            cur = await conn.execute(CLAIM, (["s"], "gone/1/given-up", 1e12, [10], [None], [None]))
            assert [r for r in await cur.fetchall() if r[1] is not None] == []
        assert _owned(postgres_url, "gone/1/given-up") == 0
        claimed, _ = await storage.deliveries.due("s", 10)
        assert len(claimed) == 3  # still there for a registered instance


async def test_an_instance_leaving_frees_the_claims_it_had_under_way(postgres_url: str) -> None:
    """The hand-over of an old id (or the reaping of a dead instance) and a claim under that id
    in flight at the same moment: whichever commits first, no row keeps the old id as owner."""
    from cebroker.storage.postgres.instances import Membership

    owner = "leaving/1/old-id"
    async with opened(PostgresStorage(postgres_url)) as storage:
        await storage.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(3)])
        with psycopg.connect(postgres_url, autocommit=True) as setup:
            setup.execute(
                "INSERT INTO broker_instances (id, host, pid, heartbeat)"
                " VALUES (%s, 'leaving', 1, clock_timestamp())",
                (owner,),
            )
        claiming = await psycopg.AsyncConnection.connect(postgres_url)  # one open transaction
        leaving = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
        try:
            cur = await claiming.execute(CLAIM, (["s"], owner, 1e12, [10], [None], [None]))
            assert len([r for r in await cur.fetchall() if r[1] is not None]) == 3

            async def leave() -> None:
                async with leaving.transaction():
                    await Membership._leave(leaving, owner)

            left = asyncio.create_task(leave())

            def waits_for_the_claim() -> bool:
                with psycopg.connect(postgres_url, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
                        (leaving.info.backend_pid,),
                    ).fetchone()
                return row is not None and row[0] == 1

            await async_wait_until(
                lambda: left.done() or waits_for_the_claim(), 10, "the leave waiting or done"
            )
            await claiming.commit()
            await asyncio.wait_for(left, 10)
        finally:
            await claiming.close()
            await leaving.close()
        assert _owned(postgres_url, owner) == 0
        taken, _ = await storage.deliveries.due("s", 10)
        assert len(taken) == 3  # freed: the live instance claims them


async def test_a_rate_limited_subscription_is_not_asked_for_again_before_its_bucket_refills(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that found the subscription's token bucket empty says when it next holds a token;
    until then no claim can succeed on any instance (the bucket is shared), so the claims made
    meanwhile (every ingest of its events asks) are answered without a round trip."""
    from cebroker.storage.queue import Limits

    async with opened(PostgresStorage(postgres_url)) as storage:
        await storage.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(5)])
        db = storage._db
        real = db.call
        calls: list[object] = []

        async def counting(query: Any, params: Any) -> list[tuple[Any, ...]]:
            calls.append(query)
            return await real(query, params)

        monkeypatch.setattr(db, "call", counting)
        limits = Limits(10, 2.0)  # a burst of two
        first, later = await storage.deliveries.due("s", 10, limits)
        assert len(first) == 2
        assert later is not None
        asked = len(calls)  # the claim that took the last token said when the bucket refills
        again, when = await storage.deliveries.due("s", 10, limits)
        assert (again, when, len(calls)) == ([], later, asked)
        await storage.deliveries.due("s", 10, Limits(10, 4.0))
        assert len(calls) == asked + 1  # a changed rate asks the database again

        async def claims_again() -> bool:
            return bool((await storage.deliveries.due("s", 10, Limits(10, 4.0)))[0])

        await async_wait_until(claims_again, 10, "a claim once the bucket refilled")


async def test_a_subscription_whose_token_bucket_is_empty_is_not_announced(postgres_url: str) -> None:
    """Until its bucket refills nobody can claim it; the instance that left it empty claims it
    itself then, so telling the others is a notification and a claim each for nothing."""
    from cebroker.storage.queue import Limits

    async with opened(PostgresStorage(postgres_url)) as one, opened(PostgresStorage(postgres_url)) as two:
        heard: list[str | None] = []
        two.claims.watch(heard.append)
        await one.deliveries.append([Incoming({"id": str(n)}, "/r", str(n), ("r",)) for n in range(2)])
        await async_wait_until(lambda: "r" in heard, 10, "the other instance told of r")
        limits = Limits(10, 0.5)  # a burst of one, then a token every two seconds
        assert len((await one.deliveries.due("r", 10, limits))[0]) == 1
        heard.clear()
        await one.deliveries.append([Incoming({"id": "3"}, "/r", "3", ("r", "s"))])
        await async_wait_until(lambda: "s" in heard, 10, "the other instance told of s")
        assert "r" not in heard  # told in the same notification as s, or not at all


async def test_a_claim_refused_before_it_was_sent_keeps_the_instance_id(postgres_url: str) -> None:
    """While the server is known to be away, a claim is refused at once without being sent: it
    cannot have committed, so the instance keeps its id and its claims (a new id would free the
    deliveries it is delivering, for the others to send again). A claim whose answer was lost
    with the connection may have committed, and does make it take a new id."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        await storage.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(2)])
        held, _ = await storage.deliveries.due("s", 1)
        assert storage.claims.holds(held[0])
        # The append's announcement goes now: sent later, its write could commit between the
        # failure below and the claim, and a write that commits ends the failure.
        await storage.deliveries.announce_now()
        storage.health.failed(StorageUnavailable("database unreachable", "test"))
        try:
            with pytest.raises(StorageUnavailable) as refused:
                await storage.deliveries.due("s", 1)
            assert refused.value.unsent
        finally:
            storage.health.succeeded()
        assert not storage._membership._suspect
        assert storage.claims.holds(held[0])


async def test_a_claim_whose_connection_was_lost_makes_the_instance_take_a_new_id(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the test above: a failure once a connection was in hand may have come
    after the claim committed, so the instance takes a new id (freeing whatever it may hold)."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        db = storage._db
        with pytest.raises(StorageUnavailable) as lost:
            async with db.connection():
                raise psycopg.OperationalError("the server closed the connection")
        assert not lost.value.unsent
        storage.health.succeeded()

        async def failing(query: Any, params: Any) -> list[tuple[Any, ...]]:
            raise lost.value

        await storage.deliveries.append([Incoming({"id": "1"}, "/s", "1", ("s",))])
        monkeypatch.setattr(db, "call", failing)
        with pytest.raises(StorageUnavailable):
            await storage.deliveries.due("s", 1)
        assert storage._membership._suspect
