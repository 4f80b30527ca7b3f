"""PostgreSQL's deliveries schema step 8: the append without the ordering groups' parts, and
the probe of the announcements (``cebroker_due_among``); upgrading from step 7 keeps the
de-duplication keys and the log."""

from __future__ import annotations

import json

import psycopg
import pytest

from cebroker.storage import Incoming
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.migrations import latest
from cebroker.storage.queue import Pending
from storage.support import DELIVERIES_VERSION, at_deliveries_step, opened

pytestmark = pytest.mark.postgres


def ids(rows: list[Pending]) -> list[str]:
    return sorted(str(json.loads(r.body or "{}")["id"]) for r in rows)


@pytest.mark.parametrize("step", [7, 8])
async def test_upgrading_from_an_earlier_step_keeps_the_keys_and_the_log(
    postgres_url: str, step: int
) -> None:
    at_deliveries_step(postgres_url, step)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # written by that step's append
        rows = conn.execute(
            "SELECT * FROM cebroker_append(extract(epoch FROM now()), 0, ARRAY[NULL]::bigint[],"
            " ARRAY['']::text[], ARRAY['/s'], ARRAY['old'], ARRAY['{\"id\": \"old\"}'], NULL,"
            " ARRAY[1], ARRAY['a'], NULL, false, 0, 1)"
        ).fetchall()
        assert [(r[0], r[3]) for r in rows[1:]] == [(1, "a")]
    async with opened(PostgresStorage(postgres_url)) as storage:
        again, new = await storage.deliveries.append(
            [Incoming({"id": "old"}, "/s", "old", ("a",)), Incoming({"id": "new"}, "/s", "new", ("a",))]
        )
        assert again is None  # the key the earlier step wrote still holds within the window
        assert new is not None
        assert [sub for _, sub in new.deliveries] == ["a"]
        pending, _ = await storage.deliveries.due("a", 10)
        assert ids(pending) == ["new", "old"]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute(DELIVERIES_VERSION).fetchone() == (latest()["deliveries"],)
        assert conn.execute("SELECT sum(pending) FROM pipeline_backlog").fetchone() == (2,)


async def test_appends_with_and_without_groups_hold_the_grouped_ones(postgres_url: str) -> None:
    """The two statements of the append: one call with a group goes through the grouped one,
    whose second delivery of a group waits behind the first; a call without goes through the
    other, and every delivery of it is due at once."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        grouped = await storage.deliveries.append(
            [
                Incoming({"id": "1"}, "/s", "1", ("a", "b"), groups=("g", None)),
                Incoming({"id": "2"}, "/s", "2", ("a",), groups=("g",)),
            ]
        )
        plain = await storage.deliveries.append([Incoming({"id": "3"}, "/s", "3", ("b",))])
        assert all(a is not None for a in [*grouped, *plain])
        a, _ = await storage.deliveries.due("a", 10)
        b, _ = await storage.deliveries.due("b", 10)
        assert ids(a) == ["1"]  # "2" waits behind "1" of group g
        assert ids(b) == ["1", "3"]


def test_the_announcement_names_the_subscriptions_whose_earliest_unclaimed_delivery_is_due(
    postgres_url: str,
) -> None:
    PostgresStorage(postgres_url).prepare()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pipeline_deliveries"
            " (id, event_seq, subscription, attempts, next_at, first_at, owner) VALUES"
            " (1, 1, 'due', 0, 5, 0, NULL),"  # due, unclaimed
            " (2, 1, 'claimed', 0, 5, 0, 'x'),"  # due, claimed
            " (3, 1, 'later', 0, 20, 0, NULL),"  # unclaimed, not yet due
            " (4, 1, 'behind', 0, 1, 0, 'x'), (5, 1, 'behind', 0, 9, 0, NULL),"  # a claimed one first
            " (6, 1, 'both', 0, 30, 0, NULL), (7, 1, 'both', 0, 2, 0, NULL)"
        )
        # backlog of another subscription, so that the probe has a log to avoid reading
        conn.execute(
            "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at)"
            " SELECT 100 + g, 1, 'busy', 0, g, 0 FROM generate_series(1, 5000) AS g"
        )
        subs = ["due", "claimed", "later", "behind", "both", "none"]
        (names,) = conn.execute("SELECT cebroker_due_among(%s, 10)", (subs,)).fetchone() or (None,)
        assert names == "behind both due"
        assert conn.execute("SELECT cebroker_due_among(ARRAY['claimed', 'later'], 10)").fetchone() == (None,)
