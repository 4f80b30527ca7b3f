"""PostgreSQL benchmark 3: end-to-end latency, ingress to sink, at a steady 1,000 events/s with
100 subscriptions, with two broker instances on one PostgreSQL database behind a round robin (each
event goes to the next instance); the same load on one instance on SQLite is the baseline,
measured in the same run.

As in ``bench_latency.py``: each subscription has an ``exact`` type filter and every event
matches one of them; each event carries its send time (``benchsent`` extension) and the sink,
a separate process on the same clock, records arrival minus send time. Single-event structured
ingress: each latency includes the durable commit before the ``202``, the claim by whichever
instance gets it first, and the delivery.

The "added latency" (as Dapr publishes it) of each setup is its publish-to-sink p50/p90/p99
minus those of the same events at the same rate sent straight to the sink (``bench_latency.bare``,
the bare transport), measured in the same run.
Usage: ``python benchmarks/bench_pg_latency.py [--rate 1000] [--seconds 10] [--subscriptions 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from pathlib import Path

import httpx
from bench_latency import bare
from harness import Child, broker, percentile, request_bytes, sink, sink_stats
from pg import postgres, uptime

STRUCTURED = {"Content-Type": "application/cloudevents+json"}
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def paced(ports: list[int], rate: float, seconds: float, types: int, connections: int) -> list[float]:
    """Send ``rate`` events/s for ``seconds``, round robin over ``ports``; the 202 latencies."""
    pools: dict[int, asyncio.Queue[Connection]] = {}
    for port in ports:
        pools[port] = asyncio.Queue()
        for _ in range(connections):
            pools[port].put_nowait(await asyncio.open_connection("127.0.0.1", port))
    acks: list[float] = []

    async def one(n: int, port: int) -> None:
        reader, writer = await pools[port].get()
        sent = time.time_ns()
        event = {
            "specversion": "1.0",
            "id": f"lat-{n}",
            "source": "/bench",
            "type": f"type-{n % types}",
            "benchsent": str(sent),
            "data": {"n": n},
        }
        writer.write(request_bytes("/events", json.dumps(event).encode(), STRUCTURED, port))
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        acks.append((time.time_ns() - sent) / 1e9)
        assert head.startswith(b"HTTP/1.1 202"), head
        pools[port].put_nowait((reader, writer))

    tasks = []
    start = time.perf_counter()
    turn = itertools.cycle(ports)
    for n in range(int(rate * seconds)):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n, next(turn))))
    await asyncio.gather(*tasks)
    for pool in pools.values():
        while not pool.empty():
            pool.get_nowait()[1].close()
    return acks


def measure(
    servers: list[Child], target: Child, args: argparse.Namespace
) -> tuple[list[float], dict[str, float]]:
    """Subscriptions created on the first server, the paced load over all; (acks, sink figures)."""
    with httpx.Client(base_url=servers[0].url) as client:
        for i in range(args.subscriptions):
            body = {
                "protocol": "HTTP",
                "sink": f"{target.url}/s{i}",
                "filters": [{"exact": {"type": f"type-{i}"}}],
            }
            assert client.post("/subscriptions", json=body).status_code == 201
    httpx.get(target.url + "/reset")
    ports = [s.port for s in servers]
    acks = asyncio.run(paced(ports, args.rate, args.seconds, args.subscriptions, connections=16))
    deadline = time.monotonic() + 30
    while sink_stats(target.url)["count"] < len(acks) and time.monotonic() < deadline:
        time.sleep(0.1)
    return acks, sink_stats(target.url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--subscriptions", type=int, default=100)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    results = {}
    with postgres() as server, tempfile.TemporaryDirectory() as tmp:
        target = sink()
        try:
            lite = broker(Path(tmp) / "bench.db", webhook_validation="off")
            try:
                results["SQLite, one instance"] = measure([lite], target, args)
            finally:
                lite.stop()
            url = server.create_database()
            pair = [broker(url, webhook_validation="off") for _ in range(2)]
            try:
                results["PostgreSQL, two instances"] = measure(pair, target, args)
            finally:
                for b in pair:
                    b.stop()
            httpx.get(target.url + "/reset")
            asyncio.run(bare(target.port, args.rate, args.seconds, connections=32))
            direct = sink_stats(target.url)
        finally:
            target.stop()
    print(f"load after:  {uptime()}")
    print(
        f"3. end-to-end latency at {args.rate:.0f} events/s, {args.subscriptions} subscriptions,"
        f" {args.seconds:g} s (target on PostgreSQL: p99 <= 50 ms)"
    )
    for name, (acks, figures) in results.items():
        print(
            f"   {name:26s}: delivered {figures['count']:.0f} of {len(acks)};"
            f" 202 p50 {percentile(acks, 0.5) * 1e3:5.1f} ms, p99 {percentile(acks, 0.99) * 1e3:5.1f} ms;"
            f" ingress->sink p50 {figures['p50'] * 1e3:5.1f} ms, p90 {figures['p90'] * 1e3:5.1f} ms,"
            f" p99 {figures['p99'] * 1e3:5.1f} ms,"
            f" max {figures['max'] * 1e3:6.1f} ms"
        )
    print(
        f"   {'bare transport':26s}: p50 {direct['p50'] * 1e3:5.1f} ms, p90 {direct['p90'] * 1e3:5.1f} ms,"
        f" p99 {direct['p99'] * 1e3:5.1f} ms (the same events straight to the sink)"
    )
    for name, (_, figures) in results.items():
        added = {q: (figures[q] - direct[q]) * 1e3 for q in ("p50", "p90", "p99")}
        print(
            f"   added latency, {name:11s}: p50 {added['p50']:5.1f} ms, p90 {added['p90']:5.1f} ms,"
            f" p99 {added['p99']:5.1f} ms (publish-to-sink minus the bare transport)"
        )


if __name__ == "__main__":
    main()
