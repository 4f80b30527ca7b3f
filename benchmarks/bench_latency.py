"""Benchmark 4: end-to-end latency, ingress to sink, at a steady 500 events/s with 100
subscriptions (each with an ``exact`` type filter; every event matches one of them).

Each event carries its send time (``benchsent`` extension, ns since the epoch); the sink, a
separate process on the same clock, records arrival minus send time. Single-event structured
ingress, so each event's latency includes its durable commit (fsync) before the 202.

The "added latency" (as Dapr publishes it) is then measured in the same run: the same events
at the same rate sent straight to the sink, one HTTP request each on kept-alive connections
(binary mode, as the broker delivers them), is the bare transport's request time; the broker's
publish-to-sink p50/p90/p99 minus the bare transport's is what the broker adds.
Usage: ``python benchmarks/bench_latency.py [--rate 500] [--seconds 10] [--subscriptions 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import httpx
from harness import broker, percentile, request_bytes, sink, sink_stats

STRUCTURED = {"Content-Type": "application/cloudevents+json"}


async def paced(port: int, rate: float, seconds: float, types: int, connections: int) -> list[float]:
    """Send ``rate`` events/s for ``seconds``; returns the ingress (202) latencies."""
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    acks: list[float] = []

    async def one(n: int) -> None:
        reader, writer = await pool.get()
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
        pool.put_nowait((reader, writer))

    tasks = []
    start = time.perf_counter()
    total = int(rate * seconds)
    for n in range(total):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n)))
    await asyncio.gather(*tasks)
    while not pool.empty():
        pool.get_nowait()[1].close()
    return acks


async def bare(port: int, rate: float, seconds: float, connections: int) -> None:
    """Send ``rate`` events/s for ``seconds`` straight to the sink (binary mode, ``ce-benchsent``
    stamped at send time): the bare transport the broker's figure is compared with."""
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(await asyncio.open_connection("127.0.0.1", port))

    async def one(n: int) -> None:
        reader, writer = await pool.get()
        body = json.dumps({"n": n}).encode()
        writer.write(
            b"POST /bare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"ce-specversion: 1.0\r\nce-id: bare-%d\r\nce-source: /bench\r\nce-type: bench\r\n"
            b"ce-benchsent: %d\r\nContent-Length: %d\r\n\r\n%s" % (n, time.time_ns(), len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 204"), head
        pool.put_nowait((reader, writer))

    tasks = []
    start = time.perf_counter()
    for n in range(int(rate * seconds)):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n)))
    await asyncio.gather(*tasks)
    while not pool.empty():
        pool.get_nowait()[1].close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--subscriptions", type=int, default=100)
    args = parser.parse_args()
    load_before = os.getloadavg()
    target = sink()
    with tempfile.TemporaryDirectory() as tmp:
        server = broker(Path(tmp) / "bench.db", webhook_validation="off")
        try:
            with httpx.Client(base_url=server.url) as client:
                for i in range(args.subscriptions):
                    body = {
                        "protocol": "HTTP",
                        "sink": f"{target.url}/s{i}",
                        "filters": [{"exact": {"type": f"type-{i}"}}],
                    }
                    assert client.post("/subscriptions", json=body).status_code == 201
            httpx.get(target.url + "/reset")
            acks = asyncio.run(
                paced(server.port, args.rate, args.seconds, args.subscriptions, connections=32)
            )
            expected = len(acks)
            deadline = time.monotonic() + 30
            while sink_stats(target.url)["count"] < expected and time.monotonic() < deadline:
                time.sleep(0.1)
            figures = sink_stats(target.url)
            httpx.get(target.url + "/reset")
            asyncio.run(bare(target.port, args.rate, args.seconds, connections=32))
            direct = sink_stats(target.url)
        finally:
            server.stop()
            target.stop()
    print(
        f"4. end-to-end latency at {args.rate:.0f} events/s, {args.subscriptions} subscriptions,"
        f" {args.seconds:.0f} s"
    )
    print(f"   delivered {figures['count']:.0f} of {expected}")
    print(
        f"   ingress 202  p50 {percentile(acks, 0.5) * 1e3:6.1f} ms"
        f"   p99 {percentile(acks, 0.99) * 1e3:6.1f} ms"
    )
    print(
        f"   ingress->sink p50 {figures['p50'] * 1e3:6.1f} ms   p99 {figures['p99'] * 1e3:6.1f} ms"
        f"   max {figures['max'] * 1e3:6.1f} ms   (target p99 <= 20 ms)"
    )
    print(
        f"   bare transport p50 {direct['p50'] * 1e3:6.1f} ms   p90 {direct['p90'] * 1e3:6.1f} ms"
        f"   p99 {direct['p99'] * 1e3:6.1f} ms   (the same events straight to the sink)"
    )
    added = {q: (figures[q] - direct[q]) * 1e3 for q in ("p50", "p90", "p99")}
    print(
        f"   added latency  p50 {added['p50']:6.1f} ms   p90 {added['p90']:6.1f} ms"
        f"   p99 {added['p99']:6.1f} ms   (publish-to-sink minus the bare transport)"
    )
    print(f"   load average (1 min): {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
