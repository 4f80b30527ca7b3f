"""PostgreSQL's deliveries schema step 9: ``cebroker_append_distinct``, the append of a call whose
keys are distinct and whose deliveries have no ordering group, answers and writes as
``cebroker_append`` does; the storage sends such calls to it and the others to
``cebroker_append``; upgrading from step 8 keeps the de-duplication keys and the log. And the
group commit's groups: the calls of one round of the event loop are one transaction."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cebroker.storage import Incoming
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.queue import Pending
from storage.support import opened

pytestmark = pytest.mark.postgres

#: The arguments both functions take, in their order, up to the deliveries' subscriptions.
COMMON = "%s, 0, %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], NULL, %s::int[], %s::text[]"
APPEND = f"SELECT * FROM cebroker_append({COMMON}, NULL, false, 0, 1)"
DISTINCT = f"SELECT * FROM cebroker_append_distinct({COMMON}, false, 1)"


def ids(rows: list[Pending]) -> list[str]:
    return sorted(str(json.loads(r.body or "{}")["id"]) for r in rows)


def _call(
    conn: psycopg.Connection[tuple[Any, ...]], statement: str, prefix: str, latest: int
) -> list[tuple[Any, ...]]:
    """One call of ``statement``, its keys named with ``prefix``: item 1 with deliveries to a and
    b, item 2 without any (fresh, not numbered: nothing is kept for a retention), item 3 a key
    written before, item 4 matched against an older subscription version, item 5 with a
    delivery to c. Returns the rows with the numbers drawn replaced by whether there is one."""
    keys = [f"{prefix}{n}" for n in range(1, 6)]
    conn.execute(
        "INSERT INTO pipeline_seen (tenant, source, id, at) VALUES ('', '/s', %s, %s)",
        (keys[2], time.time()),
    )
    rows = conn.execute(
        statement,
        (
            time.time(),
            [None, latest, None, latest - 1, latest],
            ["", "", "", "", ""],
            ["/s"] * 5,
            keys,
            [json.dumps({"id": k}) for k in keys],
            [1, 1, 5],
            ["a", "b", "c"],
        ),
    ).fetchall()
    return [
        (item, seq is not None, delivery is not None, sub, last) for item, seq, delivery, sub, last in rows
    ]


def _written(conn: psycopg.Connection[tuple[Any, ...]], prefix: str) -> list[tuple[Any, ...]]:
    """The events and deliveries written for the keys of ``prefix``, in the order of their
    numbers: (event id, subscription)."""
    return conn.execute(
        "SELECT e.body::json->>'id', d.subscription FROM pipeline_events e"
        " JOIN pipeline_deliveries d ON d.event_seq = e.seq"
        " WHERE e.body::json->>'id' LIKE %s ORDER BY e.seq, d.id",
        (f"{prefix}%",),
    ).fetchall()


def test_the_distinct_append_answers_and_writes_as_the_append(postgres_url: str) -> None:
    PostgresStorage(postgres_url).prepare()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("UPDATE subscription_version SET version = 3 RETURNING version").fetchone()
        assert row is not None
        latest = int(row[0])
        backlog = "SELECT sum(pending) FROM pipeline_backlog"
        before = conn.execute(backlog).fetchone()
        expected = _call(conn, APPEND, "x", latest)
        middle = conn.execute(backlog).fetchone()
        found = _call(conn, DISTINCT, "y", latest)
        after = conn.execute(backlog).fetchone()
        assert expected == [
            (0, False, False, None, latest),
            (1, True, True, "a", None),
            (1, True, True, "b", None),
            (2, False, False, None, None),
            (5, True, True, "c", None),
        ]
        assert found == expected
        assert _written(conn, "x") == [("x1", "a"), ("x1", "b"), ("x5", "c")]
        assert _written(conn, "y") == [("y1", "a"), ("y1", "b"), ("y5", "c")]
        assert (before, middle, after) == ((0,), (3,), (6,))
        # item 2's key was written (a repeat is a duplicate), item 4's was not (matched again)
        seen = conn.execute("SELECT id FROM pipeline_seen WHERE id LIKE 'y%' ORDER BY id").fetchall()
        assert seen == [("y1",), ("y2",), ("y3",), ("y5",)]


def _calls(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT funcname, calls FROM pg_stat_user_functions"
            " WHERE funcname IN ('cebroker_append', 'cebroker_append_distinct')"
        ).fetchall()
    return {str(name): int(calls) for name, calls in rows}


def _count_calls(url: str) -> None:
    """Have the server count the calls of the functions from the connections made from now on."""
    PostgresStorage(url).prepare()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(conn.info.dbname))
        )


async def _counted(url: str, expected: dict[str, int]) -> None:
    """Wait until the server counts ``expected`` calls (its statistics come within a second)."""
    deadline = time.monotonic() + 10
    while (calls := _calls(url)) != expected:
        assert time.monotonic() < deadline, calls
        await asyncio.sleep(0.1)


async def test_calls_with_distinct_keys_and_no_groups_go_to_the_distinct_append(postgres_url: str) -> None:
    _count_calls(postgres_url)
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        plain = await log.append(
            [Incoming({"id": "1"}, "/s", "1", ("a",)), Incoming({"id": "2"}, "/s", "2", ("a",))]
        )
        twice = await log.append(
            [Incoming({"id": "3"}, "/s", "3", ("a",)), Incoming({"id": "3"}, "/s", "3", ("a",))]
        )
        grouped = await log.append([Incoming({"id": "4"}, "/s", "4", ("a",), groups=("g",))])
        # the same id from another tenant is another key
        tenants = await log.append(
            [Incoming({"id": "5"}, "/s", "5", ("a",)), Incoming({"id": "5"}, "/s", "5", ("a",), tenant="t")]
        )
        assert [a is not None for a in plain] == [True, True]
        assert [a is not None for a in twice] == [True, False]
        assert [a is not None for a in grouped] == [True]
        assert [a is not None for a in tenants] == [True, True]
        pending, _ = await log.due("a", 10)
        assert ids(pending) == ["1", "2", "3", "4", "5", "5"]
    await _counted(postgres_url, {"cebroker_append_distinct": 2, "cebroker_append": 2})


async def test_the_calls_of_one_round_of_the_event_loop_are_one_transaction(postgres_url: str) -> None:
    """A group is taken when its transaction's task starts: calls made in the same round of the
    event loop (the requests the loop reads in one round) join it, where the first of them used
    to start a transaction alone, the second another, and the rest wait for a third."""
    _count_calls(postgres_url)
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        written = await asyncio.gather(
            *(log.append([Incoming({"id": str(n)}, "/s", str(n), ("a",))]) for n in range(10))
        )
        assert all(w[0] is not None for w in written)
        pending, _ = await log.due("a", 20)
        assert ids(pending) == sorted(str(n) for n in range(10))
    await _counted(postgres_url, {"cebroker_append_distinct": 1})
