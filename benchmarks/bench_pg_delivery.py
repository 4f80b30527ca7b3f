"""PostgreSQL benchmark 2: HTTP push deliveries per second with 1, 2 and 4 broker instances on
one PostgreSQL database, and the ratio of each to one instance, in the same run.

For each instance count, a fresh database gets the subscriptions (``--subscriptions``, each
with ``--concurrency``; the events are spread over them round robin; eight by default: one
subscription's deliveries are bounded by its concurrency over every instance together, which
more instances do not raise), the instances start
(``cebroker serve`` child processes), and then ``--events`` events are committed to the
delivery log in one transaction from this process. From that commit the instances claim and
deliver everything to the counting sink (a separate process); the rate is the events over the
time from the commit to the sink's last arrival. Where the time went is printed beside each
figure, from the commit on: CPU seconds per 1,000 deliveries of the broker instances, of
PostgreSQL, of the sink and of this process (which only polls the sink), PostgreSQL
transactions per delivery, and (``--statements``) the statements that took the server's time
and how often a backend waited on a lock (sampled every 50 ms).

With ``--instance-cpu CORES`` each instance is held to that share of one core (a cgroup CPU
quota, as a container's CPU limit: ``cpu_quota.py``; root), the database and the sink not: on
two cores, instances that each take most of a core cannot add up, while instances held to a
quarter of a core each (the CPU the Kubernetes manifest requests per instance) show what they
cost one another.
Usage: ``python benchmarks/bench_pg_delivery.py [--events 20000] [--instances 1 2 4]
[--subscriptions 8] [--concurrency 32] [--rounds 1] [--statements] [--instance-cpu CORES]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
from cpu_quota import cpu_quota
from harness import Child, broker, sink, sink_stats
from pg import (
    BenchPostgres,
    commits,
    cpu_seconds,
    lock_waits,
    own_cpu,
    postgres,
    reset_statements,
    server_pids,
    top_statements,
    uptime,
)

from cebroker.storage import Incoming, create_storage
from cebroker.subscription import Subscription


@dataclass
class Run:
    """One measured drain."""

    instances: int
    rate: float
    cpu: dict[str, float]
    #: cores each part kept busy over the drain (CPU seconds per second)
    cores: dict[str, float]
    commits_per_delivery: float
    statements: list[tuple[int, float, str]]


def _event(n: int) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"d-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


async def _setup(url: str, sink_url: str, subscriptions: int, concurrency: int) -> list[str]:
    storage = create_storage(url)
    storage.prepare()
    await storage.open()
    try:
        ids = [f"bench-{i}" for i in range(subscriptions)]
        for sid in ids:
            config = {"concurrency": str(concurrency)}
            await storage.subscriptions.create(
                Subscription(id=sid, protocol="HTTP", sink=f"{sink_url}/{sid}", config=config)
            )
        return ids
    finally:
        await storage.close()


async def _append(url: str, subscriptions: list[str], events: int) -> float:
    """Commit every event in one transaction; returns the time (epoch seconds) of the commit."""
    storage = create_storage(url)
    await storage.open()
    try:
        items = [
            Incoming(_event(n), "/bench", f"d-{n}", (subscriptions[n % len(subscriptions)],))
            for n in range(events)
        ]
        await storage.deliveries.append(items)
        return time.time()
    finally:
        await storage.close()


def drain(server: BenchPostgres, target: Child, count: int, args: argparse.Namespace) -> Run:
    """Deliveries/s of ``count`` instances draining ``args.events`` deliveries."""
    url = server.create_database()
    ids = asyncio.run(_setup(url, target.url, args.subscriptions, args.concurrency))
    instances = [broker(url, webhook_validation="off", instance_lease="10s") for _ in range(count)]
    quota = ExitStack()
    try:
        httpx.get(target.url + "/reset")
        if args.statements:
            reset_statements(url)
        broker_pids = [i.proc.pid for i in instances]
        if args.instance_cpu:
            quota.enter_context(cpu_quota(broker_pids, args.instance_cpu))
        committed = asyncio.run(_append(url, ids, args.events))
        # from the commit on: what delivering costs (the append's own cost is left out)
        before = {
            "brokers": cpu_seconds(broker_pids),
            "postgres": cpu_seconds(server_pids(server)),
            "sink": cpu_seconds([target.proc.pid]),
            "generator": own_cpu(),
        }
        xacts = commits(url)
        deadline = time.monotonic() + 600
        waits: list[int] = []
        while (figures := sink_stats(target.url))["count"] < args.events:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {figures['count']:.0f} of {args.events} delivered")
            if args.statements:
                waits.append(lock_waits(url))
            time.sleep(0.05)
        after = {
            "brokers": cpu_seconds(broker_pids),
            "postgres": cpu_seconds(server_pids(server)),
            "sink": cpu_seconds([target.proc.pid]),
            "generator": own_cpu(),
        }
        xacts = commits(url) - xacts
        statements = top_statements(url) if args.statements else []
        if waits:
            share = sum(1 for w in waits if w) / len(waits)
            statements.insert(0, (len(waits), share * 100, "samples; % with a backend waiting on a lock"))
    finally:
        for instance in instances:
            instance.stop()
        quota.close()
    seconds = figures["last"] - min(committed, figures["first"])
    per = 1000 / args.events
    cpu = {k: (after[k] - before[k]) * per for k in before}
    cores = {k: (after[k] - before[k]) / seconds for k in before}
    return Run(count, args.events / seconds, cpu, cores, xacts / args.events, statements)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--subscriptions", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--statements", action="store_true", help="print the busiest statements")
    parser.add_argument(
        "--instance-cpu", type=float, default=None, help="hold each instance to this share of a core"
    )
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    runs: dict[int, list[Run]] = {n: [] for n in args.instances}
    with postgres() as server:
        target = sink()
        try:
            for _ in range(args.rounds):
                for count in args.instances:  # alternated, so that a load swing hits every count
                    runs[count].append(drain(server, target, count, args))
        finally:
            target.stop()
    print(f"load after:  {uptime()}")
    print(
        f"2. deliveries on PostgreSQL, {args.events} events over {args.subscriptions} subscription(s)"
        f" of concurrency {args.concurrency}, {args.rounds} round(s)"
        + (f", each instance held to {args.instance_cpu:g} of a core" if args.instance_cpu else "")
    )
    base = statistics.median(r.rate for r in runs[args.instances[0]])
    for count, done in runs.items():
        rate = statistics.median(r.rate for r in done)
        run = min(done, key=lambda r: abs(r.rate - rate))
        cpu = "  ".join(f"{k} {v:.2f}" for k, v in run.cpu.items())
        print(
            f"   {count} instance(s): {rate:8.0f} deliveries/s   ratio {rate / base:4.2f}"
            f"   (rounds {', '.join(f'{r.rate:.0f}' for r in done)})"
        )
        print(f"      CPU s per 1,000: {cpu};  {run.commits_per_delivery:.2f} transactions per delivery")
        busy = "  ".join(f"{k} {v:.2f}" for k, v in run.cores.items())
        print(f"      cores busy: {sum(run.cores.values()):.2f} of {os.cpu_count()} ({busy})")
        for calls, total, query in run.statements:
            print(f"      {calls:8d} calls {total:9.0f} ms  {query}")


if __name__ == "__main__":
    main()
