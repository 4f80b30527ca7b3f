"""Benchmark: ordered delivery with 100 partition keys against unordered delivery to the same
sink, in the same run.

Each round writes N events (their ``partitionkey`` one of K keys, in turn) for an unordered HTTP
subscription and times the pipeline delivering them, then does the same for a subscription with
``config.ordering: partitionkey`` (each key's events one after the other: a delivery leaves the
log before the next of its key is due, and the loader reads that one back). Same sink, same
concurrency; rounds alternate on one storage. Prints both rates, the ratio and the load average.
Usage: ``python benchmarks/bench_ordering.py [--events 10000] [--keys 100] [--concurrency 32]
[--rounds 3] [--db postgresql://...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import httpx
from drains import InProcess, event, median_round, options, run_rounds
from harness import sink_stats

from cebroker.storage import Incoming
from cebroker.subscription import Subscription


def items(args: argparse.Namespace, run: str, subscription: str, ordered: bool) -> list[Incoming]:
    out = []
    for n in range(args.events):
        key = f"key{n % args.keys}"
        e = event(n, run, partitionkey=key)
        out.append(Incoming(e, "/bench", str(e["id"]), (subscription,), (key,) if ordered else ()))
    return out


async def drain(pipeline: InProcess, batch: list[Incoming], sink_url: str) -> float:
    await asyncio.to_thread(httpx.get, sink_url + "/reset")
    await pipeline.append(batch)
    started = time.perf_counter()
    await pipeline.start()
    await pipeline.drained()
    rate = len(batch) / (time.perf_counter() - started)
    await pipeline.stop()
    got = (await asyncio.to_thread(sink_stats, sink_url))["count"]
    if got < len(batch):
        raise RuntimeError(f"the sink got {got} of {len(batch)} deliveries")
    return rate


async def measure(
    db: Path | str, url: str, sink_url: str, args: argparse.Namespace
) -> list[tuple[float, float]]:
    config = {"concurrency": str(args.concurrency)}
    plain = Subscription(id="plain", protocol="HTTP", sink=url, config=config)
    ordered = Subscription(
        id="ordered", protocol="HTTP", sink=url, config={**config, "ordering": "partitionkey"}
    )
    pipeline = InProcess(db)
    await pipeline.open(plain, ordered)
    rounds: list[tuple[float, float]] = []
    try:
        for r in range(args.rounds):
            unordered_rate = await drain(pipeline, items(args, f"u{r}", "plain", False), sink_url)
            ordered_rate = await drain(pipeline, items(args, f"o{r}", "ordered", True), sink_url)
            rounds.append((unordered_rate, ordered_rate))
    finally:
        await pipeline.close()
    return rounds


def main() -> None:
    parser = options(__doc__, events=10_000)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()
    rounds = run_rounds(args, measure)
    median, ratios, (unordered, ordered) = median_round(rounds, lambda r: r[1] / r[0])
    print(
        f"ordered ({args.keys} keys) vs unordered delivery ({args.events} events a round, "
        f"concurrency {args.concurrency}, one process)"
    )
    print(f"   unordered : {unordered:9.0f} deliveries/s   (median round)")
    print(f"   ordered   : {ordered:9.0f} deliveries/s")
    print(f"   ratio     : {median:9.2f}   (rounds {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
