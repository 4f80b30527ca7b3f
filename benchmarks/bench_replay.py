"""Benchmark: replay rate against live delivery to the same sink, in the same run.

Each round writes N fresh events for one HTTP subscription to the durable log, starts the
pipeline and times it delivering them (live: page loads from the log, lane workers, the sender,
completion writes), then replays those N events from the archive to the same subscription and
times that (the replayer queueing a window at a time, the loader, the same lane and sender).
Rounds alternate on one storage with a retention. Prints both rates per round, the ratio and
the load average.
Usage: ``python benchmarks/bench_replay.py [--events 10000] [--concurrency 32] [--rounds 3]
[--db postgresql://...]``.
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


async def measure(
    db: Path | str, url: str, sink_url: str, args: argparse.Namespace
) -> list[tuple[float, float]]:
    sub = Subscription(id="bench", protocol="HTTP", sink=url, config={"concurrency": str(args.concurrency)})
    pipeline = InProcess(db)
    await pipeline.open(sub)
    rounds: list[tuple[float, float]] = []
    try:
        for r in range(args.rounds):
            since = time.time()
            items = [
                Incoming(e, "/bench", str(e["id"]), ("bench",))
                for e in (event(n, f"r{r}") for n in range(args.events))
            ]
            await asyncio.to_thread(httpx.get, sink_url + "/reset")
            await pipeline.append(items)
            started = time.perf_counter()
            await pipeline.start()
            await pipeline.drained()
            live = args.events / (time.perf_counter() - started)
            seconds = await pipeline.replay("bench", f"replay-{r}", since)
            replayed = args.events / seconds
            await pipeline.stop()
            got = (await asyncio.to_thread(sink_stats, sink_url))["count"]
            if got < 2 * args.events:
                raise RuntimeError(f"the sink got {got} of {2 * args.events} deliveries")
            rounds.append((live, replayed))
    finally:
        await pipeline.close()
    return rounds


def main() -> None:
    args = options(__doc__, events=10_000).parse_args()
    rounds = run_rounds(args, measure)
    median, ratios, (live, replayed) = median_round(rounds, lambda r: r[1] / r[0])
    print(
        f"replay vs live delivery ({args.events} events a round, concurrency {args.concurrency}, one process)"
    )
    print(f"   live delivery : {live:9.0f} deliveries/s   (median round)")
    print(f"   replay        : {replayed:9.0f} deliveries/s")
    print(f"   ratio         : {median:9.2f}   (rounds {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
