"""Benchmarks 1 and 2: ingress throughput.

1. Single-event structured ``POST /events`` (durable 202), events/s, against a bare Starlette
   endpoint answering 202 under the same uvicorn settings, measured in the same run; ratio.
2. Batch ingress (``application/cloudevents-batch+json``, 1000 events per request), durable
   events/s.

Each event matches one subscription (rate-limited, so delivery does not compete for the CPU),
so every accepted event writes its event row, its de-duplication key and a delivery row.
Usage: ``python benchmarks/bench_ingress.py [--seconds 5] [--concurrency 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from harness import Child, broker, free_port, load, percentile, request_bytes

STRUCTURED = {"Content-Type": "application/cloudevents+json"}
BATCH = {"Content-Type": "application/cloudevents-batch+json"}


def _event(n: int, run: str) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"{run}-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "time": "2024-05-01T10:00:00Z",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


def _single(port: int, run: str) -> Callable[[int], bytes]:
    return lambda n: request_bytes("/events", json.dumps(_event(n, run)).encode(), STRUCTURED, port)


def _batch(port: int, size: int) -> Callable[[int], bytes]:
    def make(n: int) -> bytes:
        body = json.dumps([_event(n * size + k, "batch") for k in range(size)]).encode()
        return request_bytes("/events", body, BATCH, port)

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()

    port = free_port()
    bare = Child(
        ["-m", "uvicorn", "bare_app:app", "--port", str(port), "--log-level", "warning", "--no-access-log"],
        port,
        "/readyz",
        env={"PYTHONPATH": str(Path(__file__).parent)},
    )
    try:
        baseline = asyncio.run(
            load(port, _single(port, "bare"), concurrency=args.concurrency, seconds=args.seconds)
        )
    finally:
        bare.stop()

    with tempfile.TemporaryDirectory() as tmp:
        server = broker(Path(tmp) / "bench.db", webhook_validation="off")
        try:
            sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
            assert httpx.post(server.url + "/subscriptions", json=sub).status_code == 201
            single = asyncio.run(
                load(
                    server.port,
                    _single(server.port, "one"),
                    concurrency=args.concurrency,
                    seconds=args.seconds,
                )
            )
            batches = asyncio.run(
                load(server.port, _batch(server.port, args.batch), concurrency=4, seconds=args.seconds)
            )
        finally:
            server.stop()

    ok = single.statuses.get(202, 0)
    print(f"1. single-event structured ingress ({args.concurrency} connections, {args.seconds:.0f} s)")
    print(
        f"   bare Starlette 202 : {baseline.rate:9.0f} req/s"
        f"  p50 {percentile(baseline.latencies, 0.5) * 1e3:.1f} ms"
    )
    print(
        f"   broker (durable)   : {single.rate:9.0f} ev/s "
        f"  p50 {percentile(single.latencies, 0.5) * 1e3:.1f} ms"
        f"  p99 {percentile(single.latencies, 0.99) * 1e3:.1f} ms  statuses {single.statuses}"
    )
    print(f"   ratio broker/bare  : {single.rate / baseline.rate:9.2f}   (target >= 0.5; {ok} accepted)")
    events = batches.statuses.get(202, 0) * args.batch
    print(f"2. batch ingress, durable ({args.batch} events/request, 4 connections)")
    print(f"   {events / batches.seconds:9.0f} events/s   statuses {batches.statuses}   (target >= 50,000)")


if __name__ == "__main__":
    main()
