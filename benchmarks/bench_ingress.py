"""Benchmarks 1 and 2: ingress throughput.

1. Single-event structured ``POST /events`` (durable 202), events/s, against a bare Starlette
   endpoint answering 202 under the same uvicorn settings, measured in the same run; ratio.
2. Batch ingress (``application/cloudevents-batch+json``, 1000 events per request), durable
   events/s.

Each event matches one subscription (rate-limited, so delivery does not compete for the CPU),
so every accepted event writes its event row, its de-duplication key and a delivery row.
Usage: ``python benchmarks/bench_ingress.py [--rounds 3] [--seconds 3] [--concurrency 32]``.

With ``--wrk``, benchmark 1 only, with ``wrk`` (C, one thread; ``ingress.lua`` gives each request
an event id of its own) as the load generator instead of the Python one, for both server stacks
in the same run: uvicorn's standard extras (uvloop event loop, httptools parser: what ``cebroker
serve`` uses by default) and the plain ones (asyncio, h11). For each stack the broker and the
bare endpoint run side by side with the same loop and parser, loaded in turn, round after round;
the load average (``uptime``) is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
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


STACKS = {"standard": ("uvloop", "httptools"), "plain": ("asyncio", "h11")}
LUA = Path(__file__).with_name("ingress.lua")


def _wrk(url: str, run: str, *, connections: int, seconds: float) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, non-2xx responses) of one wrk run against ``url``."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(LUA), url, "--", run],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(_find(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def millis(label: str) -> float:
        value, unit = _find(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rate, millis("50"), millis("99"), int(bad.group(1)) if bad else 0


def wrk_timed(
    server: Child, run: str, *, connections: int, seconds: float
) -> tuple[float, float, float, float]:
    """(requests/s, p50 ms, p99 ms, ``server``'s CPU µs per request) of one wrk run against
    ``server``; an answer other than 2xx is an error."""
    spent = server.cpu_seconds()
    rate, p50, p99, bad = _wrk(server.url, run, connections=connections, seconds=seconds)
    if bad:
        raise RuntimeError(f"{server.url}: {bad} answers other than 2xx")
    return rate, p50, p99, (server.cpu_seconds() - spent) / (rate * seconds) * 1e6


def _find(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text, re.M)
    if found is None:
        raise RuntimeError(f"wrk printed no {pattern!r}:\n{text}")
    return found


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def wrk_main(args: argparse.Namespace) -> None:
    """Benchmark 1 with wrk, standard and plain server stacks, both ratios in one run."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk; scripts/install-servers.sh does)")
    print(f"load before: {_uptime()}")
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in STACKS}
    #: Per stack and round: CPU microseconds per request of the bare endpoint and of the broker.
    cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in STACKS}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        try:
            for name, (loop, http) in STACKS.items():
                port = free_port()
                bare = Child(
                    ["-m", "uvicorn", "bare_app:app", "--port", str(port), "--log-level", "warning"]
                    + ["--no-access-log", "--loop", loop, "--http", http],
                    port,
                    "/readyz",
                    env={"PYTHONPATH": str(Path(__file__).parent)},
                )
                server = broker(Path(tmp) / f"{name}.db", webhook_validation="off", loop=loop, http=http)
                servers[name] = (bare, server)
                sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
                assert httpx.post(server.url + "/subscriptions", json=sub).status_code == 201
            for r in range(args.rounds):
                for name, (bare, server) in servers.items():
                    base = wrk_timed(bare, f"bare{r}", connections=args.concurrency, seconds=args.seconds)
                    one = wrk_timed(server, f"{name}{r}", connections=args.concurrency, seconds=args.seconds)
                    results[name].append((base[0], one[0], one[1], one[2]))
                    cpu[name].append((base[3], one[3]))
        finally:
            for bare, server in servers.values():
                server.stop()
                bare.stop()
    print(f"load after:  {_uptime()}")
    print(
        f"1. single-event structured ingress, wrk -t1 -c{args.concurrency}, "
        f"{args.rounds} rounds of {args.seconds:g} s per server"
    )
    for name, (loop, http) in STACKS.items():
        rounds = results[name]
        ratios = [one / base for base, one, _, _ in rounds]
        median = statistics.median(ratios)
        bare_rate, broker_rate, p50, p99 = min(rounds, key=lambda r: abs(r[1] / r[0] - median))
        print(f"   {name} ({loop} + {http})")
        print(f"     bare Starlette 202 : {bare_rate:9.0f} req/s   (median round)")
        print(f"     broker (durable)   : {broker_rate:9.0f} ev/s    p50 {p50:.1f} ms  p99 {p99:.1f} ms")
        print(f"     ratio broker/bare  : {median:9.2f}   (rounds {', '.join(f'{x:.2f}' for x in ratios)})")
        bare_us = statistics.median(b for b, _ in cpu[name])
        broker_us = statistics.median(o for _, o in cpu[name])
        print(
            f"     CPU per request    : broker {broker_us:.0f} us, bare {bare_us:.0f} us, ratio bare/broker"
            f" {bare_us / broker_us:.2f}   (medians; all threads, user + system)"
        )
    standard = statistics.median(one for _, one, _, _ in results["standard"])
    plain = statistics.median(one for _, one, _, _ in results["plain"])
    print(f"   broker standard/plain: {standard / plain:.2f}x events/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per round and server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--wrk", action="store_true", help="benchmark 1 with wrk, both server stacks")
    args = parser.parse_args()
    if args.wrk:
        wrk_main(args)
        return

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
