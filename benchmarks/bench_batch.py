"""Benchmark: batched HTTP delivery (100 events per request) against single-event delivery to
the same sink, events/s, in the same run (target: at least 5 times as many).

Each round writes N events for a binary-mode HTTP subscription and times the pipeline
delivering them one request each, then N events for a ``contentmode: batch`` subscription
(``maxbatchsize`` 100) and times those; the sink counts the events of every batch. Same sink,
same concurrency; rounds alternate on one storage. Prints both rates, the ratio, the requests
the sink got and the load average.
Usage: ``python benchmarks/bench_batch.py [--events 20000] [--size 100] [--concurrency 32]
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


async def drain(
    pipeline: InProcess, subscription: str, run: str, count: int, sink_url: str
) -> tuple[float, int]:
    """Events/s delivering ``count`` events of ``subscription``, and the requests it took."""
    batch = [
        Incoming(e, "/bench", str(e["id"]), (subscription,)) for e in (event(n, run) for n in range(count))
    ]
    await asyncio.to_thread(httpx.get, sink_url + "/reset")
    await pipeline.append(batch)
    started = time.perf_counter()
    await pipeline.start()
    await pipeline.drained()
    rate = count / (time.perf_counter() - started)
    await pipeline.stop()
    stats = await asyncio.to_thread(sink_stats, sink_url)
    if stats["count"] < count:
        raise RuntimeError(f"the sink got {stats['count']} of {count} events")
    return rate, int(stats["requests"])


async def measure(
    db: Path | str, url: str, sink_url: str, args: argparse.Namespace
) -> list[tuple[float, float, int]]:
    config = {"concurrency": str(args.concurrency)}
    single = Subscription(id="single", protocol="HTTP", sink=url, config=config)
    batched = Subscription(
        id="batched",
        protocol="HTTP",
        sink=url,
        protocolsettings={"contentmode": "batch"},
        config={**config, "maxbatchsize": str(args.size)},
    )
    pipeline = InProcess(db)
    await pipeline.open(single, batched)
    rounds: list[tuple[float, float, int]] = []
    try:
        await drain(pipeline, "single", "warm", 1000, sink_url)  # imports, connections, caches
        for r in range(args.rounds):
            one, _ = await drain(pipeline, "single", f"s{r}", args.events, sink_url)
            many, requests = await drain(pipeline, "batched", f"b{r}", args.events, sink_url)
            rounds.append((one, many, requests))
    finally:
        await pipeline.close()
    return rounds


def main() -> None:
    parser = options(__doc__, events=20_000)
    parser.add_argument("--size", type=int, default=100, help="maxbatchsize")
    args = parser.parse_args()
    rounds = run_rounds(args, measure)
    median, ratios, (one, many, requests) = median_round(rounds, lambda r: r[1] / r[0])
    print(
        f"batched ({args.size} per request) vs single-event HTTP delivery ({args.events} events a round, "
        f"concurrency {args.concurrency}, one process)"
    )
    print(f"   single events : {one:9.0f} events/s   (median round)")
    each = args.events / requests
    print(f"   batches       : {many:9.0f} events/s   ({requests} requests, {each:.0f} events each)")
    print(f"   ratio         : {median:9.2f}   (target >= 5; rounds {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
