"""Benchmark: HTTP delivery with a typical transformation against the same subscription without
one, deliveries/s, in the same run (target: a ratio of at least 0.8).

The transformation picks three fields of the data and renames two attributes (``source`` to
``origin``, ``subject`` to ``topic``), the shape of an old webhook that wants a flat body. Each
round writes N events for the plain subscription and times the pipeline delivering them, and N
events for the transformed one and times those (which goes first alternates from round to
round); same sink, same concurrency, one storage, the server's garbage collector policy. The
median of the rounds' ratios is the figure. Prints both rates, the process's CPU time per
delivery while it drains (every thread), the ratio and the load average (the machine may be
shared: read the ratio, not the absolute figures).
Usage: ``python benchmarks/bench_transform.py [--events 5000] [--concurrency 32] [--rounds 3]
[--db postgresql://...]``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from drains import InProcess, median_round, options, run_rounds

from cebroker.pipeline.gcpause import freeze_started
from cebroker.subscription import Subscription

#: Three fields of the data, two attributes renamed, the rest as stored.
TYPICAL = (
    '{"type": event.type, "source": "/partner", "origin": event.source, "topic": event.subject,'
    ' "datacontenttype": "application/json",'
    ' "data": {"order": event.data.order, "amount": event.data.amount, "currency": event.data.currency}}'
)


def order(n: int, run: str) -> dict[str, object]:
    """An order event (about 300 bytes of JSON)."""
    return {
        "specversion": "1.0",
        "id": f"{run}-{n}",
        "source": "/shop",
        "type": "com.example.order",
        "subject": f"orders/{n}",
        "datacontenttype": "application/json",
        "data": {
            "order": n,
            "amount": 12.5,
            "currency": "EUR",
            "customer": {"id": "c-1", "tier": "gold"},
            "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
            "note": "x" * 60,
        },
    }


#: One drain's figures: deliveries/s and the CPU time per delivery (s).
Drain = tuple[float, float]


async def drain(pipeline: InProcess, subscription: str, run: str, count: int, sink_url: str) -> Drain:
    """Deliveries/s delivering ``count`` events of ``subscription``, and the CPU per delivery."""
    rate = await pipeline.delivery_rate(subscription, [order(n, run) for n in range(count)], sink_url)
    return rate, pipeline.last_cpu


async def measure(
    db: Path | str, url: str, sink_url: str, args: argparse.Namespace
) -> list[tuple[Drain, Drain]]:
    config = {"concurrency": str(args.concurrency)}
    plain = Subscription(id="plain", protocol="HTTP", sink=url, config=config)
    shaped = Subscription(
        id="shaped", protocol="HTTP", sink=url, config={**config, "transform": {"cel": TYPICAL}}
    )
    pipeline = InProcess(db)
    await pipeline.open(plain, shaped)
    rounds: list[tuple[Drain, Drain]] = []
    try:
        await drain(pipeline, "plain", "warm", 500, sink_url)  # imports, connections, caches
        await drain(pipeline, "shaped", "warmt", 500, sink_url)
        # The collector's policy of ``cebroker serve`` once started (what the process holds now
        # kept out of full collections, young ones less often), as bench_delivery.py has it: a
        # full collection otherwise scans this process's prepared events too, which the server
        # never holds (measured: 10 to 29 µs per delivery of collections, either side).
        freeze_started()
        for r in range(args.rounds):
            # Which goes first alternates, so that neither always runs on a warmer process.
            if r % 2:
                with_ = await drain(pipeline, "shaped", f"t{r}", args.events, sink_url)
                without = await drain(pipeline, "plain", f"p{r}", args.events, sink_url)
            else:
                without = await drain(pipeline, "plain", f"p{r}", args.events, sink_url)
                with_ = await drain(pipeline, "shaped", f"t{r}", args.events, sink_url)
            rounds.append((without, with_))
    finally:
        await pipeline.close()
    return rounds


def main() -> None:
    args = options(__doc__, events=5_000).parse_args()
    rounds = run_rounds(args, measure)
    median, ratios, (without, with_) = median_round(rounds, lambda r: r[1][0] / r[0][0])
    print(f"HTTP delivery with a typical transformation vs none ({args.events} events a round, one process)")
    print(f"   no transformation : {without[0]:9.0f} deliveries/s, {without[1] * 1e6:5.1f} µs CPU each")
    print(f"   transformation    : {with_[0]:9.0f} deliveries/s, {with_[1] * 1e6:5.1f} µs CPU each")
    print("                       (the median round's)")
    each = ", ".join(f"{x:.2f}" for x in ratios)
    print(f"   ratio             : {median:9.2f}   (target >= 0.8; rounds {each})")
    cpu = statistics.median(r[0][1] / r[1][1] for r in rounds)
    print(f"   CPU ratio         : {cpu:9.2f}   (plain CPU per delivery / transformed, median of rounds)")


if __name__ == "__main__":
    main()
