"""PostgreSQL benchmark 6: the database server's cost of claiming and completing deliveries
when several instances share the subscriptions, with the claim as it is (deliveries schema step
11: the subscriptions of a call without a rate limit claimed in three statements) against the
claim of step 7 (``cebroker_claim`` called once per subscription), in the same run; ratios
new/old.

Each round makes two fresh databases on one server, the "old" one with step 7's
``cebroker_claim_many`` put back, fills each with ``--deliveries`` deliveries over
``--subscriptions`` subscriptions, registers ``--owners`` instances, and then, from one
connection of this process, lets the owners take turns: each completes what it claimed at its
last turn (``cebroker_complete``) and claims up to ``--per`` deliveries of every subscription
(the share of a subscription's concurrency one of four instances takes), until 80 % of the
deliveries are done; the delivery table is vacuumed as the broker does (its thresholds).
Printed: the server's CPU microseconds per delivery (the backend's own, from /proc) and the
wall time per delivery, medians of the rounds, with the load average before and after. No
broker runs: this is the statements' cost alone, which the multi-instance benchmark
(``bench_pg_delivery.py``) measures with everything else.
Usage: ``python benchmarks/bench_pg_claims.py [--rounds 3] [--owners 4] [--per 8]
[--subscriptions 8] [--deliveries 40000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psycopg
from pg import cpu_seconds, postgres, uptime

from cebroker.storage import Incoming, create_storage
from cebroker.storage.postgres.migrations import STEPS
from cebroker.storage.postgres.vacuum import STATS, VACUUM, Thresholds


def _step_7_claim_many() -> str:
    """Step 7's ``cebroker_claim_many``: a call of ``cebroker_claim`` per subscription."""
    step = STEPS["deliveries"][6].text
    start = step.index("CREATE OR REPLACE FUNCTION cebroker_claim_many(")
    return step[start : step.index("END $$;", start) + len("END $$;")]


#: The claim the "old" database gets back.
OLD = _step_7_claim_many()


async def _fill(url: str, subscriptions: list[str], count: int) -> None:
    storage = create_storage(url)
    storage.prepare()
    await storage.open()
    try:
        events = [
            Incoming({"id": str(n), "data": "x" * 100}, "/bench", str(n), (sub,))
            for n, sub in ((n, subscriptions[n % len(subscriptions)]) for n in range(count))
        ]
        await storage.deliveries.append(events)
    finally:
        await storage.close()


def _drain(url: str, subscriptions: list[str], args: argparse.Namespace) -> tuple[float, float]:
    """(server CPU us, wall us) per delivery of the owners' turns."""
    owners = [f"owner-{n}" for n in range(args.owners)]
    thresholds = Thresholds()
    with psycopg.connect(url, autocommit=True) as conn:
        for owner in owners:
            conn.execute(
                "INSERT INTO broker_instances (id, host, pid, heartbeat) VALUES (%s, 'bench', 0, now())",
                (owner,),
            )
        conn.execute("VACUUM ANALYZE pipeline_deliveries")
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        backend = int(row[0])
        held: dict[str, list[int]] = {owner: [] for owner in owners}
        claim = (
            "SELECT * FROM cebroker_claim_many(%s, %s, extract(epoch FROM now()), %s::int[], %s::int[],"
            " %s::float8[])"
        )
        params = ([args.per] * len(subscriptions), [args.per * args.owners] * len(subscriptions))
        goal, done, turns = int(args.deliveries * 0.8), 0, 0
        cpu, started = cpu_seconds([backend]), time.perf_counter()
        while done < goal:
            for owner in owners:
                if held[owner]:
                    conn.execute("SELECT cebroker_complete(%s::bigint[], 0, 0)", (held[owner],))
                    done += len(held[owner])
                rows = conn.execute(claim, (subscriptions, owner, *params, [None] * len(subscriptions)))
                held[owner] = [int(r[1]) for r in rows if r[1] is not None]
            turns += 1
            if turns % 20 == 0:  # as an instance's vacuum does
                stats = conn.execute(STATS).fetchone()
                if stats is not None and thresholds.due(int(stats[0]), int(stats[1])):
                    conn.execute(VACUUM)
        return (cpu_seconds([backend]) - cpu) / done * 1e6, (time.perf_counter() - started) / done * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--per", type=int, default=8)
    parser.add_argument("--subscriptions", type=int, default=8)
    parser.add_argument("--deliveries", type=int, default=40000)
    args = parser.parse_args()
    subscriptions = [f"bench-{n}" for n in range(args.subscriptions)]
    print(f"load before: {uptime()}")
    results: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    with postgres() as server:
        for _ in range(args.rounds):
            for name in results:  # alternated, so that a load swing hits both
                url = server.create_database()
                asyncio.run(_fill(url, subscriptions, args.deliveries))
                if name == "old":
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute(OLD.encode())
                results[name].append(_drain(url, subscriptions, args))
    print(f"load after:  {uptime()}")
    print(
        f"6. claims and completions on PostgreSQL, {args.owners} owner(s) taking turns, up to {args.per}"
        f" deliveries of each of {args.subscriptions} subscriptions a claim; step 11's claim (new)"
        f" against step 7's (old), {args.rounds} round(s)"
    )
    for column, label in ((0, "server CPU us per delivery"), (1, "wall us per delivery")):
        old = statistics.median(r[column] for r in results["old"])
        new = statistics.median(r[column] for r in results["new"])
        print(f"   {label}: old {old:6.1f}, new {new:6.1f}, ratio {new / old:4.2f}")


if __name__ == "__main__":
    main()
