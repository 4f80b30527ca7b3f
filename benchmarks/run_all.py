"""Run the benchmarks and print one table row each, the way the README's benchmark table reads:
what was measured (script, arguments, date, load average before and after), and the figures the
script printed, same-run baselines and ratios included.

Each benchmark runs as its own process, one after the other; its own output is shown as it
comes (``--quiet`` hides it) and the rows are printed together at the end. The machine's load
average is read before and after each benchmark: on a shared machine single figures move with
it, the ratios to a baseline measured in the same run much less.

Usage: ``python benchmarks/run_all.py [--quick] [--only ingress,delivery,...] [--pg]
[--protocols] [--base COMMIT]``. ``--quick`` runs fewer and shorter rounds (a smoke run: figures
are noisier); ``--pg`` adds the PostgreSQL benchmarks (their own private cluster; ``postgres``
installed), ``--protocols`` the deliveries into real MQTT, AMQP, Kafka and NATS servers,
``--base`` this tree against an earlier commit (``bench_versus.py``: is anything slower?).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    """One benchmark: its key, the table row's title, its script, full and quick arguments."""

    key: str
    title: str
    script: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    group: str = "core"


BENCHES = (
    Bench(
        "ingress-wrk",
        "single-event structured ingress, durable 202, wrk -c32, both server stacks",
        "bench_ingress.py",
        ("--wrk", "--rounds", "5", "--seconds", "5"),
        ("--wrk", "--rounds", "3", "--seconds", "2"),
    ),
    Bench(
        "ingress",
        "single-event and batch ingress, durable (Python load generator)",
        "bench_ingress.py",
        ("--rounds", "3", "--seconds", "3"),
        ("--rounds", "1", "--seconds", "2"),
    ),
    Bench(
        "delivery",
        "HTTP push deliveries to a local sink",
        "bench_delivery.py",
        ("--events", "20000", "--rounds", "3"),
        ("--events", "5000", "--rounds", "1"),
    ),
    Bench(
        "latency",
        "end-to-end and added latency, 1,000 events/s, 100 subscriptions, one instance on SQLite",
        "bench_latency.py",
        ("--rate", "1000", "--seconds", "10"),
        ("--rate", "1000", "--seconds", "3"),
    ),
    Bench("batch", "batched HTTP delivery, 100 events a request", "bench_batch.py"),
    Bench("ordering", "ordered delivery, 100 partition keys", "bench_ordering.py"),
    Bench("replay", "replay vs live delivery to the same sink", "bench_replay.py"),
    Bench(
        "retention",
        "ingest with the archive on",
        "bench_retention.py",
        ("--rounds", "3"),
        ("--rounds", "1", "--seconds", "2"),
    ),
    Bench(
        "protocols",
        "deliveries through the broker into real servers",
        "protocols_bench.py",
        (),
        ("--events", "1000"),
        "protocols",
    ),
    Bench(
        "pg-ingress",
        "ingress into one instance on PostgreSQL vs SQLite",
        "bench_pg_ingress.py",
        ("--rounds", "5", "--seconds", "2", "--wrk"),
        ("--rounds", "1", "--seconds", "2", "--wrk"),
        "pg",
    ),
    Bench(
        "pg-delivery",
        "deliveries with 1, 2 and 4 instances on one PostgreSQL",
        "bench_pg_delivery.py",
        ("--rounds", "3"),
        ("--events", "5000"),
        "pg",
    ),
    Bench(
        "pg-delivery-quota",
        "deliveries with 1, 2 and 4 instances on one PostgreSQL, each held to a quarter of a core",
        "bench_pg_delivery.py",
        ("--rounds", "3", "--events", "40000", "--instance-cpu", "0.25"),
        ("--events", "5000", "--instance-cpu", "0.25"),
        "pg",
    ),
    Bench(
        "pg-claims",
        "the server's cost of claims and completions, four instances taking turns",
        "bench_pg_claims.py",
        ("--rounds", "3"),
        ("--rounds", "1", "--deliveries", "8000"),
        "pg",
    ),
    Bench(
        "pg-latency",
        "end-to-end and added latency, 1,000 events/s, 100 subscriptions, two instances on PostgreSQL",
        "bench_pg_latency.py",
        ("--rate", "1000", "--seconds", "10"),
        ("--rate", "1000", "--seconds", "3"),
        "pg",
    ),
    Bench(
        "versus",
        "this tree against an earlier commit (--base): single-event ingest, batch ingest, delivery",
        "bench_versus.py",
        ("--rounds", "5"),
        ("--rounds", "1", "--seconds", "2"),
        "versus",
    ),
)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def run(bench: Bench, *, quick: bool, quiet: bool) -> str:
    """Run ``bench`` and return its table row."""
    args = bench.quick if quick else bench.full
    before = _load()
    started = datetime.datetime.now(datetime.UTC)
    done = subprocess.run(
        [sys.executable, str(HERE / bench.script), *args], cwd=HERE, capture_output=True, text=True
    )
    after = _load()
    if not quiet:
        print(done.stdout, end="", flush=True)
    lines = [" ".join(line.split()) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        lines.append(f"**failed** (exit {done.returncode}): {tail[0]}")
    command = " ".join(["benchmarks/" + bench.script, *args])
    where = f"`{command}`, {started:%Y-%m-%d}, load average (1/5 min) {before} before, {after} after"
    return f"| {bench.title} ({where}) | {'; '.join(lines)} |"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds (noisier figures)")
    keys = ", ".join(b.key for b in BENCHES)
    parser.add_argument("--only", default="", help=f"comma-separated keys: {keys}")
    parser.add_argument("--pg", action="store_true", help="add the PostgreSQL benchmarks")
    parser.add_argument("--protocols", action="store_true", help="add MQTT, AMQP, Kafka and NATS deliveries")
    parser.add_argument("--base", default="", help="an earlier commit to compare this tree with")
    parser.add_argument("--quiet", action="store_true", help="print only the rows")
    args = parser.parse_args()
    groups = {"core"} | ({"pg"} if args.pg else set()) | ({"protocols"} if args.protocols else set())
    groups |= {"versus"} if args.base else set()
    only = {key.strip() for key in args.only.split(",") if key.strip()}
    unknown = only - {b.key for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmarks {sorted(unknown)}")
    chosen = [b for b in BENCHES if (b.key in only if only else b.group in groups)]
    if any(b.group == "versus" for b in chosen) and not args.base:
        parser.error("the versus benchmark needs --base COMMIT")
    chosen = [
        dataclasses.replace(b, full=(*b.full, "--base", args.base), quick=(*b.quick, "--base", args.base))
        if b.group == "versus"
        else b
        for b in chosen
    ]
    rows = []
    for bench in chosen:
        if not args.quiet:
            print(f"== {bench.key}: {bench.script}", flush=True)
        rows.append(run(bench, quick=args.quick, quiet=args.quiet))
    print()
    print("| benchmark | figures (result, same-run baseline, ratio) |")
    print("|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
