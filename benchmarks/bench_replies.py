"""Benchmark: HTTP delivery with sink replies published (``config.reply: publish``, each answer
a small binary CloudEvent ingested before its delivery completes) against the same delivery
without replies (the sink answers 204), deliveries/s, in the same run.

Each round writes N events for the plain subscription and times the pipeline delivering them,
and N events for the replying one (its sink path answers with an event) and times those (which
goes first alternates); same sink process, same concurrency, one storage. The replies match no
subscription, so the difference is reading, checking and committing each reply. The median of
the rounds' ratios is the figure. Prints both rates, the ratio and the load average (the machine
may be shared: read the ratio, not the absolute figures).
Usage: ``python benchmarks/bench_replies.py [--events 3000] [--concurrency 32] [--rounds 3]
[--db postgresql://...]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drains import InProcess, event, median_round, options, run_rounds

from cebroker.subscription import Subscription

TYPES = ("com.example.bench",)


async def drain(pipeline: InProcess, subscription: str, run: str, count: int, sink_url: str) -> float:
    """Deliveries/s delivering ``count`` events of ``subscription``."""
    return await pipeline.delivery_rate(subscription, [event(n, run) for n in range(count)], sink_url)


async def measure(
    db: Path | str, url: str, sink_url: str, args: argparse.Namespace
) -> list[tuple[float, float]]:
    config = {"concurrency": str(args.concurrency)}
    plain = Subscription(id="plain", protocol="HTTP", sink=url, types=TYPES, config=config)
    replying = Subscription(
        id="replying",
        protocol="HTTP",
        sink=sink_url + "/reply/deliver",
        types=TYPES,
        config={**config, "reply": "publish"},
    )
    pipeline = InProcess(db)
    await pipeline.open(plain, replying)
    rounds: list[tuple[float, float]] = []
    try:
        await drain(pipeline, "plain", "warm", 500, sink_url)  # imports, connections, caches
        await drain(pipeline, "replying", "warmr", 500, sink_url)
        for r in range(args.rounds):
            if r % 2:
                with_ = await drain(pipeline, "replying", f"r{r}", args.events, sink_url)
                without = await drain(pipeline, "plain", f"p{r}", args.events, sink_url)
            else:
                without = await drain(pipeline, "plain", f"p{r}", args.events, sink_url)
                with_ = await drain(pipeline, "replying", f"r{r}", args.events, sink_url)
            rounds.append((without, with_))
        published = await pipeline.storage.archive.stats()
        print(f"   events in the archive after the run: {published.events} (requests and replies)")
    finally:
        await pipeline.close()
    return rounds


def main() -> None:
    args = options(__doc__, events=3_000).parse_args()
    rounds = run_rounds(args, measure)
    median, ratios, (without, with_) = median_round(rounds, lambda r: r[1] / r[0])
    print(f"HTTP delivery with sink replies published vs none ({args.events} events a round, one process)")
    print(f"   replies off : {without:9.0f} deliveries/s   (median round)")
    print(f"   replies on  : {with_:9.0f} deliveries/s")
    each = ", ".join(f"{x:.2f}" for x in ratios)
    print(f"   ratio       : {median:9.2f}   (rounds {each})")


if __name__ == "__main__":
    main()
