"""PostgreSQL benchmark 1: single-event and batch ingress into one broker instance on
PostgreSQL against the same broker on SQLite, in the same run; ratios PostgreSQL/SQLite.

Both brokers run side by side (``cebroker serve`` child processes with the same settings) and
are loaded in turn, round after round, so that a load swing on a shared machine hits both
alike; the median round is reported. The workload is that of ``bench_ingress.py``: structured
single events from 32 keep-alive connections, and batches of 1,000 events from 4; every event
matches one subscription (rate-limited, so that delivery does not compete for the CPU) and
writes its event, its de-duplication key and one delivery. Both commit durably before the
``202`` (SQLite ``synchronous=FULL``, PostgreSQL ``synchronous_commit = on``, fsync on).
With ``--wrk`` the single events come from ``wrk`` (C, one thread; ``ingress.lua``) instead of
the Python load generator, which on a 2-core machine competes with the brokers for the CPU; the
CPU time per single event is printed too: the broker's process, and for PostgreSQL its server's
processes as well. With ``--base <commit>`` a third broker, the tree of that commit (a
temporary git worktree, imported with the same interpreter and libraries), runs on its own
database of the same PostgreSQL server and is loaded in turn with the two others; its figures
and the ratios this ÷ base are printed too (the server's CPU is that of every backend while
one broker is loaded: the idle brokers' few statements count in it).
Every broker runs with the backlog bound (``--max-backlog``) raised to :data:`BACKLOG`: the
rate-limited subscription keeps every delivery pending, and on a quiet machine the SQLite
broker's rounds reach the default bound of 1,000,000 (503 ``overloaded``) within seven.
``--batch 0`` leaves the batches out (single events only: shorter runs, and a log that grows by
the single events alone).
Usage: ``python benchmarks/bench_pg_ingress.py [--rounds 3] [--seconds 3] [--concurrency 32] [--wrk]
[--batch 1000] [--base <commit>]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
from bench_ingress import _batch, _single, wrk_timed
from bench_telemetry import base_tree
from harness import Child, broker, load, percentile
from pg import cpu_seconds, postgres, reset_statements, server_pids, uptime

#: Pending deliveries above which the brokers refuse events (far above what a run writes).
BACKLOG = 100_000_000

#: One round of one broker: single events/s, their p99 (ms), batch events/s, the CPU
#: microseconds per single event of the broker and of the database server (0 for SQLite), and
#: the single events per ingest transaction (0 for SQLite).
Round = tuple[float, float, float, float, float, float]


def _per_append(url: str) -> float:
    """Events per ingest transaction (``cebroker_append*`` call) in the database of ``url``
    since the statements were last reset (each call answers a row per event and one more)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sum(calls), sum(rows) FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND toplevel AND query LIKE 'SELECT * FROM cebroker_append%'"
        ).fetchone()
    calls, rows = (int(x or 0) for x in row or (0, 0))
    return (rows - calls) / calls if calls else 0.0


def _round(server: Child, name: str, args: argparse.Namespace, database: list[int], url: str | None) -> Round:
    """One round against ``server``; ``database``: the PIDs of its database server (none for
    SQLite), ``url`` its database (None for SQLite)."""
    if url is not None:
        reset_statements(url)
    spent, spent_db = server.cpu_seconds(), cpu_seconds(database)
    if args.wrk:
        rate, _, p99, cpu = wrk_timed(server, name, connections=args.concurrency, seconds=args.seconds)
    else:
        one = asyncio.run(
            load(server.port, _single(server.port, name), concurrency=args.concurrency, seconds=args.seconds)
        )
        if set(one.statuses) != {202}:
            raise RuntimeError(f"answers other than 202: {one.statuses}")
        rate, p99 = one.requests / one.seconds, percentile(one.latencies, 0.99) * 1e3
        cpu = (server.cpu_seconds() - spent) / (rate * args.seconds) * 1e6
    cpu_db = (cpu_seconds(database) - spent_db) / (rate * args.seconds) * 1e6
    grouped = 0.0 if url is None else _per_append(url)
    if not args.batch:
        return rate, p99, 0.0, cpu, cpu_db, grouped
    many = asyncio.run(
        load(server.port, _batch(server.port, args.batch, f"b{name}"), concurrency=4, seconds=args.seconds)
    )
    if set(many.statuses) != {202}:
        raise RuntimeError(f"answers other than 202: {many.statuses}")
    return rate, p99, many.requests * args.batch / many.seconds, cpu, cpu_db, grouped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per round, workload and server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1000, help="events per batch; 0: no batches")
    parser.add_argument("--wrk", action="store_true", help="single events from wrk")
    parser.add_argument("--base", help="an earlier commit, served on PostgreSQL too")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    results: dict[str, list[Round]] = {"sqlite": [], "postgres": []}
    with postgres() as server, tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        urls: dict[str, str | None] = {"sqlite": None, "postgres": server.create_database()}
        brokers = {
            "sqlite": broker(Path(tmp) / "bench.db", webhook_validation="off", max_backlog=str(BACKLOG)),
            "postgres": broker(str(urls["postgres"]), webhook_validation="off", max_backlog=str(BACKLOG)),
        }
        if args.base:
            tree = stack.enter_context(base_tree(args.base))
            urls["base"] = server.create_database()
            brokers["base"] = broker(
                str(urls["base"]), tree=tree, webhook_validation="off", max_backlog=str(BACKLOG)
            )
            results["base"] = []
        try:
            for b in brokers.values():
                sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
                assert httpx.post(b.url + "/subscriptions", json=sub).status_code == 201
            for r in range(args.rounds):
                for name, b in brokers.items():
                    pids = server_pids(server) if name != "sqlite" else []  # backends come and go
                    results[name].append(_round(b, f"{name}{r}", args, pids, urls[name]))
        finally:
            for b in brokers.values():
                b.stop()
    print(f"load after:  {uptime()}")
    print(
        f"1. ingress into one instance, PostgreSQL vs SQLite ({args.rounds} rounds of {args.seconds:g} s;"
        f" single events from {args.concurrency} connections{' (wrk)' if args.wrk else ''}"
        f"{f', batches of {args.batch} from 4' if args.batch else ''})"
    )
    for column, label in ((0, "single-event"), (2, "batch"))[: 2 if args.batch else 1]:
        lite = [r[column] for r in results["sqlite"]]
        pg = [r[column] for r in results["postgres"]]
        ratios = [p / s for p, s in zip(pg, lite, strict=True)]
        print(
            f"   {label:12s}: SQLite {statistics.median(lite):7.0f} events/s,"
            f" PostgreSQL {statistics.median(pg):7.0f} events/s, ratio {statistics.median(ratios):.2f}"
            f"   (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    p99 = {name: statistics.median(r[1] for r in rows) for name, rows in results.items()}
    print(f"   single-event p99: SQLite {p99['sqlite']:.1f} ms, PostgreSQL {p99['postgres']:.1f} ms")
    cpu = {name: statistics.median(r[3] for r in rows) for name, rows in results.items()}
    server_cpu = statistics.median(r[4] for r in results["postgres"])
    print(
        f"   single-event CPU per event: SQLite broker {cpu['sqlite']:.0f} us; PostgreSQL broker"
        f" {cpu['postgres']:.0f} us + its server {server_cpu:.0f} us (medians);"
        f" {statistics.median(r[5] for r in results['postgres']):.1f} events per ingest transaction"
    )
    if "base" in results:
        _versus(results, args.base)


def _versus(results: dict[str, list[Round]], base: str) -> None:
    """This tree against ``base``, both on PostgreSQL: medians and ratios this ÷ base per round."""
    print(f"   this tree against {base} on PostgreSQL (ratios this / base, per round):")
    for column, label in (
        (0, "single-event events/s"),
        (2, "batch events/s"),
        (3, "broker CPU us/event"),
        (4, "server CPU us/event"),
        (5, "events per transaction"),
    ):
        if column == 2 and not results["base"][0][2]:
            continue  # no batches
        digits = 1 if column == 5 else 0
        this = [r[column] for r in results["postgres"]]
        old = [r[column] for r in results["base"]]
        ratios = [t / o for t, o in zip(this, old, strict=True)]
        print(
            f"   {label:22s}: base {statistics.median(old):7.{digits}f},"
            f" this {statistics.median(this):7.{digits}f},"
            f" ratio {statistics.median(ratios):.2f}   (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    lite = [r[0] for r in results["sqlite"]]
    ratios = [o / s for o, s in zip((r[0] for r in results["base"]), lite, strict=True)]
    print(f"   base's single-event ratio to SQLite: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
