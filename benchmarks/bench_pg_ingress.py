"""PostgreSQL benchmark 1: single-event and batch ingress into one broker instance on
PostgreSQL against the same broker on SQLite, in the same run; ratios PostgreSQL/SQLite.

Both brokers run side by side (``cebroker serve`` child processes with the same settings) and
are loaded in turn, round after round, so that a load swing on a shared machine hits both
alike; the median round is reported. The workload is that of ``bench_ingress.py``: structured
single events from 32 keep-alive connections, and batches of 1,000 events from 4; every event
matches one subscription (rate-limited, so that delivery does not compete for the CPU) and
writes its event, its de-duplication key and one delivery. Both commit durably before the
``202`` (SQLite ``synchronous=FULL``, PostgreSQL ``synchronous_commit = on``, fsync on).
Usage: ``python benchmarks/bench_pg_ingress.py [--rounds 3] [--seconds 3] [--concurrency 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

import httpx
from bench_ingress import _batch, _single
from harness import Child, broker, load, percentile
from pg import postgres, uptime


def _round(server: Child, name: str, args: argparse.Namespace) -> tuple[float, float, float]:
    """(single events/s, its p99 in ms, batch events/s) of one round against ``server``."""
    one = asyncio.run(
        load(server.port, _single(server.port, name), concurrency=args.concurrency, seconds=args.seconds)
    )
    many = asyncio.run(
        load(server.port, _batch(server.port, args.batch, f"b{name}"), concurrency=4, seconds=args.seconds)
    )
    if set(one.statuses) != {202} or set(many.statuses) != {202}:
        raise RuntimeError(f"answers other than 202: {one.statuses} {many.statuses}")
    return (
        one.requests / one.seconds,
        percentile(one.latencies, 0.99) * 1e3,
        many.requests * args.batch / many.seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per round, workload and server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    results: dict[str, list[tuple[float, float, float]]] = {"sqlite": [], "postgres": []}
    with postgres() as server, tempfile.TemporaryDirectory() as tmp:
        brokers = {
            "sqlite": broker(Path(tmp) / "bench.db", webhook_validation="off"),
            "postgres": broker(server.create_database(), webhook_validation="off"),
        }
        try:
            for b in brokers.values():
                sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
                assert httpx.post(b.url + "/subscriptions", json=sub).status_code == 201
            for r in range(args.rounds):
                for name, b in brokers.items():
                    results[name].append(_round(b, f"{name}{r}", args))
        finally:
            for b in brokers.values():
                b.stop()
    print(f"load after:  {uptime()}")
    print(
        f"1. ingress into one instance, PostgreSQL vs SQLite ({args.rounds} rounds of {args.seconds:g} s;"
        f" single events from {args.concurrency} connections, batches of {args.batch} from 4)"
    )
    for column, label in ((0, "single-event"), (2, "batch")):
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


if __name__ == "__main__":
    main()
