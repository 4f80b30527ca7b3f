"""Benchmark 3: HTTP push deliveries per second to a local sink, and the ratios to two bare
client loops against the same sink with the same concurrency, in the same run: a bare aiohttp
client loop (a ``ClientSession`` set up as a delivery client: the baseline) and a loop over the
broker's own transport (:mod:`ceprotocols.http.transport` without the pipeline: the ceiling);
with ``--httpx`` also a plain ``httpx.AsyncClient`` loop.

The broker side is measured on its own: N events for one subscription are first written to
the durable log, then the pipeline starts and drains them (page loads from the log, lane
workers, the HTTP sender, completion writes), timed until the log is empty. The broker runs in
this one process (one core for the event loop plus the log writer thread); the sink is a
separate process. Before each side is measured, the garbage collector gets the policy
``cebroker serve`` gives it after its start-up (what the process holds so far is frozen out of
its scans, and the young generation is collected less often): both sides are measured alike.
The three sides alternate for ``--rounds`` rounds (which of them goes first rotates), and the
medians are printed with every round's ratios; the plain ``httpx`` loop runs once first with
``--httpx``.
Usage: ``python benchmarks/bench_delivery.py [--events 20000] [--concurrency 32] [--rounds 3]
[--httpx]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
from ceprotocols.http.transport import HttpTransport
from harness import pipeline_drain, sink, sink_stats

from cebroker.pipeline.gcpause import freeze_started
from cebroker.storage import Incoming
from cebroker.subscription import Subscription


def _freeze() -> None:
    """The garbage collector's policy of ``cebroker serve`` once started
    (:func:`cebroker.pipeline.gcpause.freeze_started`): what the process holds now is kept out
    of the collector's scans (the broker's modules would otherwise be scanned at each full
    collection), and the young generation is collected less often."""
    freeze_started()


def _event(n: int) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"d-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


async def plain_loop(url: str, events: int, concurrency: int) -> float:
    """Deliveries/s of a plain ``httpx.AsyncClient`` loop (binary mode headers, same body)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:

        async def send(headers: dict[str, str], body: bytes) -> int:
            return (await client.post(url, content=body, headers=headers)).status_code

        return await _timed_loop(events, concurrency, send, None)


async def _timed_loop(
    events: int,
    concurrency: int,
    send: Callable[[dict[str, str], bytes], Awaitable[int]],
    cpu: list[float] | None,
) -> float:
    """Deliveries/s of ``concurrency`` workers sending ``events`` requests with ``send`` (which
    returns the answer's status), each with the binary-mode headers and body of a delivery; the
    CPU seconds they took are appended to ``cpu``."""
    spent = time.process_time()
    counter = iter(range(events))

    async def worker() -> None:
        for n in counter:
            headers = {"ce-specversion": "1.0", "ce-id": f"t-{n}", "ce-source": "/bench"}
            headers.update({"ce-type": "com.example.bench", "content-type": "application/json"})
            status = await send(headers, json.dumps({"n": n, "payload": "x" * 100}).encode())
            assert 200 <= status < 300

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = events / (time.perf_counter() - started)
    if cpu is not None:
        cpu.append(time.process_time() - spent)
    return rate


async def plain_aiohttp_loop(
    url: str, events: int, concurrency: int, cpu: list[float] | None = None
) -> float:
    """Deliveries/s of a bare aiohttp loop: one ``aiohttp.ClientSession`` set up as a delivery
    client would be (no cookies, no decompression, no proxy from the environment, one total
    timeout, the answer's body read), the same bodies and headers; the CPU seconds it took are
    appended to ``cpu``."""
    _freeze()
    connector = aiohttp.TCPConnector(limit=1024, limit_per_host=256)
    session = aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        skip_auto_headers=("Content-Type", "Accept-Encoding"),
        trust_env=False,
    )
    timeout = aiohttp.ClientTimeout(total=10)

    async def send(headers: dict[str, str], body: bytes) -> int:
        async with session.post(url, headers=headers, data=body, timeout=timeout) as r:
            await r.read()
            return r.status

    try:
        return await _timed_loop(events, concurrency, send, cpu)
    finally:
        await session.close()


async def plain_transport_loop(
    url: str, events: int, concurrency: int, cpu: list[float] | None = None
) -> float:
    """Deliveries/s of a bare loop over the broker's own HTTP transport (the ceiling); the CPU
    seconds it took are appended to ``cpu``."""
    _freeze()
    transport = HttpTransport()

    async def send(headers: dict[str, str], body: bytes) -> int:
        return (await transport.request("POST", url, headers, body, deadline=10)).status

    try:
        return await _timed_loop(events, concurrency, send, cpu)
    finally:
        await transport.aclose()


async def broker_drain(
    db: Path, url: str, events: int, concurrency: int, cpu: list[float] | None = None
) -> float:
    """Deliveries/s of the pipeline draining ``events`` pending deliveries (its CPU seconds
    appended to ``cpu``)."""
    _freeze()
    sub = Subscription(id="bench", protocol="HTTP", sink=url, config={"concurrency": str(concurrency)})

    def incoming(n: int) -> Incoming:
        e = _event(n)
        return Incoming(e, "/bench", str(e["id"]), ("bench",))

    return await pipeline_drain(db, sub, events, incoming, cpu)


def _median(values: list[float]) -> float:
    return statistics.median(values)


#: The sides of a round, each in its own event loop: the bare aiohttp loop (the baseline), the
#: bare loop over the broker's transport (the ceiling) and the broker's drain.
SIDES = ("aiohttp", "transport", "broker")


def _side(side: str, url: str, events: int, concurrency: int, cpu: list[float]) -> float:
    if side == "aiohttp":
        return asyncio.run(plain_aiohttp_loop(url, events, concurrency, cpu))
    if side == "transport":
        return asyncio.run(plain_transport_loop(url, events, concurrency, cpu))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(broker_drain(Path(tmp) / "bench.db", url, events, concurrency, cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of the three sides")
    parser.add_argument("--httpx", action="store_true", help="also time a plain httpx.AsyncClient loop")
    args = parser.parse_args()
    load = os.getloadavg()
    target = sink()
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    cpus: dict[str, list[float]] = {side: [] for side in SIDES}
    baseline = None
    try:
        url = target.url + "/deliver"
        if args.httpx:
            baseline = asyncio.run(plain_loop(url, args.events, args.concurrency))
        for r in range(args.rounds):
            # Each round starts with another side, so that none always follows the same one's
            # after-effects (the log's preload writes, the sink's warm connections).
            for side in SIDES[r % 3 :] + SIDES[: r % 3]:
                httpx.get(target.url + "/reset")
                cpu: list[float] = []
                rates[side].append(_side(side, url, args.events, args.concurrency, cpu))
                cpus[side].append(cpu[0] / args.events * 1e6)
                received = sink_stats(target.url)["count"]
                if received < args.events:
                    raise SystemExit(f"{side}: the sink got {received:.0f} of {args.events} deliveries")
            print(
                f"   round {r + 1}: "
                + "; ".join(f"{side} {rates[side][-1]:.0f}/s, {cpus[side][-1]:.0f} us" for side in SIDES),
                flush=True,
            )
    finally:
        target.stop()
    rate = {side: _median(rates[side]) for side in SIDES}
    per = {side: _median(cpus[side]) for side in SIDES}

    def ratios(over: str) -> str:
        each = [b / o for b, o in zip(rates["broker"], rates[over], strict=True)]
        per_cpu = _median([o / b for b, o in zip(cpus["broker"], cpus[over], strict=True)])
        listed = ", ".join(f"{x:.2f}" for x in each)
        return f"{_median(each):.2f} (rounds {listed}); CPU {over}/broker {per_cpu:.2f}"

    print(
        f"3. HTTP push deliveries ({args.events} events, concurrency {args.concurrency}, one process,"
        f" {args.rounds} alternated rounds, medians)"
    )
    if baseline is not None:
        print(
            f"   plain httpx loop   : {baseline:9.0f} deliveries/s"
            f"   (broker/httpx {rate['broker'] / baseline:.2f})"
        )
    print(
        f"   aiohttp loop       : {rate['aiohttp']:9.0f} deliveries/s, {per['aiohttp']:.0f} us per delivery"
    )
    print(
        f"   transport loop     : {rate['transport']:9.0f} deliveries/s,"
        f" {per['transport']:.0f} us per delivery   (the broker's own HTTP transport, no pipeline)"
    )
    print(f"   broker pipeline    : {rate['broker']:9.0f} deliveries/s, {per['broker']:.0f} us per delivery")
    print(f"   broker/aiohttp     : {ratios('aiohttp')}")
    print(f"   broker/transport   : {ratios('transport')}")
    print("   (CPU: this process, all threads)")
    print(f"   load average (1 min): {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
