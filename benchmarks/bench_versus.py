"""This tree against an earlier commit, in the same run: is anything slower?

Two ``cebroker serve`` processes run side by side, each over its own SQLite file: **base**, the
tree of ``--base`` (checked out with ``git worktree`` into a temporary directory and imported
from there, with the same interpreter and libraries), and **this** tree. Per round, in turn
(the order alternates from round to round): single-event structured ingest loaded by ``wrk``
(``-c32``, events/s and the broker's CPU time per event), batch ingest (``--batch`` events per
request from the Python load generator, events/s), and delivery (``--events`` events posted in
batches to a subscription of a counting sink, timed from the first post to the last arrival).
Every ratio is this ÷ base, per round; the medians are printed with every round's ratio and the
load average before and after (the machine may be shared: read the ratios with it). The events
ingested match an idle subscription whose deliveries stay pending, so both brokers run with the
backlog bound (``--max-backlog``) raised to :data:`BACKLOG`: five rounds of both ingests pass
the default million, and a broker answering 503 would measure its refusals.
Usage: ``python benchmarks/bench_versus.py --base <commit> [--rounds 5] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from bench_ingress import wrk_timed
from bench_telemetry import _batch, base_tree, deliver, ingest, serve, subscribe
from drains import uptime
from harness import sink

KINDS = ("base", "this")
FIGURES = ("single", "single CPU", "batch", "delivery")
#: The backlog bound both brokers run with (pending deliveries; the default is a million).
BACKLOG = 100_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16, help="of the batch load")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--events", type=int, default=3000)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    results: dict[str, dict[str, list[float]]] = {k: {f: [] for f in FIGURES} for k in KINDS}
    with base_tree(args.base) as tree, tempfile.TemporaryDirectory() as tmp:
        sinks = {kind: sink() for kind in KINDS}
        env = {"CEBROKER_MAX_BACKLOG": str(BACKLOG)}
        servers = {
            "base": serve(Path(tmp) / "base.db", tree=tree, env=env),
            "this": serve(Path(tmp) / "this.db", env=env),
        }
        try:
            for kind, server in servers.items():
                subscribe(server, sinks[kind])
            for r in range(args.rounds):
                for kind in KINDS if r % 2 == 0 else tuple(reversed(KINDS)):
                    server, run, figures = servers[kind], f"{kind}{r}", results[kind]
                    rate, _, _, cpu = wrk_timed(server, run + "s", connections=32, seconds=args.seconds)
                    figures["single"].append(rate)
                    figures["single CPU"].append(cpu)
                    batch = _batch(server.port, args.batch, run + "b")
                    figures["batch"].append(asyncio.run(ingest(server, batch, args.batch, args)))
                    figures["delivery"].append(deliver(server, sinks[kind], run + "d", args.events))
        finally:
            for child in [*servers.values(), *sinks.values()]:
                child.stop()
    print(f"load after:  {uptime()}")
    print(
        f"this tree vs {args.base}: {args.rounds} rounds of {args.seconds:g} s per load; single events"
        f" from wrk -c32, batches of {args.batch} from {args.concurrency} connections,"
        f" {args.events} deliveries"
    )
    for name, label, unit in (
        ("single", "single-event ingest", "events/s"),
        ("single CPU", "single-event CPU per event", "us"),
        ("batch", "batch ingest", "events/s"),
        ("delivery", "delivery", "deliveries/s"),
    ):
        base, this = results["base"][name], results["this"][name]
        ratios = [t / b for t, b in zip(this, base, strict=True)]
        print(
            f"  {label:27s}: base {statistics.median(base):8.0f} {unit}, this {statistics.median(this):8.0f};"
            f" this/base {statistics.median(ratios):.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )


if __name__ == "__main__":
    main()
