"""PostgreSQL benchmark 5: the cost of one ingest transaction for the small groups that
single-event ingress makes, with the append as it is against an earlier one, in the same run;
ratios new/old. The groups here have distinct keys and no ordering group, which the storage
sends to step 9's ``cebroker_append_distinct`` (fewer parts for the server); the "old" database
gets, under that function's name, the statement step 8's ``cebroker_append`` runs for such a
group (``--old 8``, the only choice now). The comparisons of earlier rounds (step 5's append
against step 6's, steps 6 and 7's against step 8's: ``--old 5`` and ``--old 7``) were made with
this benchmark as it was at the commits of those rounds, when these groups went to
``cebroker_append``.

Each round makes two fresh databases on one server, one of them with the earlier function put
back, and appends ``--appends`` groups of each size in turn, one after the other from this
process (each group one event per delivery, one subscription). Printed per size: milliseconds
per append (wall clock, the durable commit included) and the server's CPU milliseconds per
append (the postmaster and every backend), medians of the rounds, with the load average before
and after.
Usage: ``python benchmarks/bench_pg_append.py [--rounds 3] [--appends 300] [--sizes 1 4 12 32]
[--old 8]``.
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


def _without_groups(step_8: str) -> str:
    """Step 8's ``cebroker_append`` as ``cebroker_append_distinct``: without the ordering groups'
    arguments, their locks and their statement."""
    text = step_8[
        step_8.index("CREATE OR REPLACE FUNCTION cebroker_append(") : step_8.index("CREATE FUNCTION")
    ]
    text = text.replace("FUNCTION cebroker_append(", "FUNCTION cebroker_append_distinct(")
    text = text.replace(
        "p_groups text[],\n        p_keep boolean, p_held double precision,", "p_keep boolean,"
    )
    text = re.sub(r"\n    IF p_groups IS NOT NULL THEN\n.*?END IF;", "", text, count=1, flags=re.S)
    plain = text.index("    IF p_groups IS NULL THEN\n")
    grouped = text.index("    ELSE\n", plain)
    end = text.index("    END IF;\n", grouped)
    text = (
        text[:plain]
        + text[plain + len("    IF p_groups IS NULL THEN\n") : grouped]
        + text[end + len("    END IF;\n") :]
    )
    if "p_groups" in text or "p_held" in text:
        raise RuntimeError("step 8's append no longer has the shape this benchmark takes apart")
    return text


#: Step 8's append of a group without ordering groups, under the name and arguments of step 9's
#: ``cebroker_append_distinct`` (what the storage calls for the groups of this benchmark).
STEP_8_DISTINCT = _without_groups(STEPS["deliveries"][7].text)
#: The earlier append put back on the "old" database, per ``--old``.
OLD = {8: STEP_8_DISTINCT}


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
    parser.add_argument("--old", type=int, choices=sorted(OLD), default=8, help="the earlier step's append")
    args = parser.parse_args()
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
    what = {8: "step 9's append of distinct keys (new) against step 8's append without groups (old)"}[
        args.old
    ]
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
