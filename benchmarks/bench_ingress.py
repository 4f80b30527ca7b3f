"""Benchmarks 1 and 2: ingress throughput.

1. Single-event structured ``POST /events`` (durable 202), events/s, against a bare Starlette
   endpoint answering 202 under the same uvicorn settings, measured in the same run; ratio.
2. Batch ingress (``application/cloudevents-batch+json``, 1000 events per request), durable
   events/s.

Each event matches one subscription (rate-limited, so delivery does not compete for the CPU),
so every accepted event writes its event row, its de-duplication key and a delivery row.
Usage: ``python benchmarks/bench_ingress.py [--rounds 3] [--seconds 3] [--concurrency 32]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from harness import Child, LoadResult, broker, free_port, load, percentile, request_bytes

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


def _batch(port: int, size: int, run: str) -> Callable[[int], bytes]:
    def make(n: int) -> bytes:
        body = json.dumps([_event(n * size + k, run) for k in range(size)]).encode()
        return request_bytes("/events", body, BATCH, port)

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per round and server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()

    # Both servers run side by side and are loaded in turn, round after round, so that a load
    # swing on a shared machine hits both sides alike; the median round is reported.
    port = free_port()
    bare = Child(
        ["-m", "uvicorn", "bare_app:app", "--port", str(port), "--log-level", "warning", "--no-access-log"],
        port,
        "/readyz",
        env={"PYTHONPATH": str(Path(__file__).parent)},
    )
    ratios: list[float] = []
    rates: list[tuple[float, float]] = []
    singles: list[LoadResult] = []
    batch_rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = broker(Path(tmp) / "bench.db", webhook_validation="off")
        try:
            sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
            assert httpx.post(server.url + "/subscriptions", json=sub).status_code == 201
            for r in range(args.rounds):
                base = asyncio.run(
                    load(port, _single(port, f"bare{r}"), concurrency=args.concurrency, seconds=args.seconds)
                )
                one = asyncio.run(
                    load(
                        server.port,
                        _single(server.port, f"one{r}"),
                        concurrency=args.concurrency,
                        seconds=args.seconds,
                    )
                )
                many = asyncio.run(
                    load(
                        server.port,
                        _batch(server.port, args.batch, f"b{r}"),
                        concurrency=4,
                        seconds=args.seconds,
                    )
                )
                rates.append((base.rate, one.statuses.get(202, 0) / one.seconds))
                ratios.append(rates[-1][1] / rates[-1][0])
                singles.append(one)
                batch_rates.append(many.statuses.get(202, 0) * args.batch / many.seconds)
        finally:
            server.stop()
            bare.stop()

    median = statistics.median(ratios)
    middle = ratios.index(median) if median in ratios else 0
    base_rate, one_rate = rates[middle]
    one = singles[middle]
    print(
        f"1. single-event structured ingress ({args.concurrency} connections,"
        f" {args.rounds} rounds of {args.seconds:.0f} s)"
    )
    print(f"   bare Starlette 202 : {base_rate:9.0f} req/s   (median round)")
    print(
        f"   broker (durable)   : {one_rate:9.0f} ev/s "
        f"  p50 {percentile(one.latencies, 0.5) * 1e3:.1f} ms"
        f"  p99 {percentile(one.latencies, 0.99) * 1e3:.1f} ms"
    )
    print(
        f"   ratio broker/bare  : {median:9.2f}"
        f"   (target >= 0.5; rounds {', '.join(f'{x:.2f}' for x in ratios)})"
    )
    print(f"2. batch ingress, durable ({args.batch} events/request, 4 connections)")
    print(
        f"   {statistics.median(batch_rates):9.0f} events/s median, best {max(batch_rates):.0f}"
        f"   (target >= 50,000; rounds {', '.join(f'{x:.0f}' for x in batch_rates)})"
    )


if __name__ == "__main__":
    main()
