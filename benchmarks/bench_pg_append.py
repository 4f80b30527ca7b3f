"""PostgreSQL benchmark 5: the cost of one ingest transaction (``cebroker_append``) for the small
groups that single-event ingress makes, with the append as it is against an earlier one, in the
same run; ratios new/old. ``--old 7`` (the default): the append of steps 6 and 7 (one statement
whether or not a delivery has an ordering group) against that of step 8 (without the groups'
parts when none has one). ``--old 5``: the append of step 5, planned for every call, against
the current one (step 6 made a group of at most 32 events and 64 deliveries run the plans its
connection made once).

Each round makes two fresh databases on one server, one of them with the earlier function put
back, and appends ``--appends`` groups of each size in turn, one after the other from this
process (each group one event per delivery, one subscription). Printed per size: milliseconds
per append (wall clock, the durable commit included) and the server's CPU milliseconds per
append (the postmaster and every backend), medians of the rounds, with the load average before
and after.
Usage: ``python benchmarks/bench_pg_append.py [--rounds 3] [--appends 300] [--sizes 1 4 12 32]
[--old 7]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time

import psycopg
from pg import BenchPostgres, cpu_seconds, postgres, server_pids, uptime

from cebroker.storage import Incoming, create_storage
from cebroker.storage.postgres.migrations import STEPS
from cebroker.subscription import Subscription

#: Per group size: (wall ms, server CPU ms) per append.
Figures = dict[int, tuple[float, float]]
#: The append of step 6 (and 7): one statement whether or not a delivery has an ordering group.
STEP_6 = STEPS["deliveries"][5].text
#: Step 6 without its choice of plans: the append as step 5 made it (planned for every call).
STEP_5 = re.sub(r"\n    IF cardinality\(p_ids\).*?END IF;", "", STEP_6, count=1, flags=re.S)
#: The earlier append put back on the "old" database, per ``--old``.
OLD = {5: STEP_5, 7: STEP_6}


def _event(n: int) -> dict[str, object]:
    return {"specversion": "1.0", "id": f"e{n}", "source": "/bench", "type": "t", "data": {"n": n}}


async def _appends(url: str, server: BenchPostgres, sizes: list[int], count: int) -> Figures:
    """Per size: (wall ms, server CPU ms) per append of ``count`` appends."""
    storage = create_storage(url)
    await storage.open()
    out: Figures = {}
    try:
        await storage.subscriptions.create(
            Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/none", config={"ratelimit": "1"})
        )
        n = 0
        for size in sizes:
            started, cpu = time.perf_counter(), cpu_seconds(server_pids(server))
            for _ in range(count):
                await storage.deliveries.append(
                    [Incoming(_event(n + i), "/bench", f"e{n + i}", ("s",)) for i in range(size)]
                )
                n += size
            wall = (time.perf_counter() - started) / count * 1e3
            out[size] = (wall, (cpu_seconds(server_pids(server)) - cpu) / count * 1e3)
    finally:
        await storage.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 12, 32])
    parser.add_argument("--old", type=int, choices=sorted(OLD), default=7, help="the earlier step's append")
    args = parser.parse_args()
    if STEP_6 == STEP_5:
        raise RuntimeError("step 6 no longer has the choice of plans this benchmark takes out")
    print(f"load before: {uptime()}")
    results: dict[str, list[Figures]] = {"old": [], "new": []}
    with postgres() as server:
        for _ in range(args.rounds):
            for name in results:  # alternated, so that a load swing hits both
                url = server.create_database()
                create_storage(url).prepare()
                if name == "old":
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute(OLD[args.old].encode())
                results[name].append(asyncio.run(_appends(url, server, args.sizes, args.appends)))
    print(f"load after:  {uptime()}")
    what = {
        5: "plans made once for small groups (new) against planned for every call (old, step 5)",
        7: "the append of step 8 (new) against that of steps 6 and 7 (old)",
    }[args.old]
    print(f"5. one append on PostgreSQL: {what}; {args.rounds} round(s) of {args.appends} appends per size")
    for size in args.sizes:
        figures = []
        for column, label in ((0, "ms per append"), (1, "server CPU ms per append")):
            old = statistics.median(r[size][column] for r in results["old"])
            new = statistics.median(r[size][column] for r in results["new"])
            figures.append(f"{label}: old {old:5.2f}, new {new:5.2f}, ratio {new / old:4.2f}")
        print(f"   {size:3d} event(s): {';  '.join(figures)}")


if __name__ == "__main__":
    main()
