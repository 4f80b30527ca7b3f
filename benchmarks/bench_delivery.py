"""Benchmark 3: HTTP push deliveries per second to a local sink, and the ratio to a bare client
loop against the same sink with the same concurrency, in the same run: a loop over the broker's
own transport (the aiohttp session :mod:`ceprotocols.http.transport` configures, without the
pipeline: the ceiling); with ``--httpx`` also a plain ``httpx.AsyncClient`` loop.

The broker side is measured on its own: N events for one subscription are first written to
the durable log, then the pipeline starts and drains them (page loads from the log, lane
workers, the HTTP sender, completion writes), timed until the log is empty. The broker runs in
this one process (one core for the event loop plus the log writer thread); the sink is a
separate process. Before each side is measured, the garbage collector gets the policy
``cebroker serve`` gives it after its start-up (what the process holds so far is frozen out of
its scans, and the young generation is collected less often): both sides are measured alike.
The loop over the transport and the broker's drain alternate for ``--rounds`` rounds (which of
them goes first alternates too), and the medians are printed with every round's ratio; the
plain ``httpx`` loop runs once first with ``--httpx``.
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
from pathlib import Path

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
    """Deliveries/s of a bare client loop (binary mode headers, same body)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    counter = iter(range(events))
    async with httpx.AsyncClient(limits=limits) as client:

        async def worker() -> None:
            for n in counter:
                headers = {"ce-specversion": "1.0", "ce-id": f"p-{n}", "ce-source": "/bench"}
                headers.update({"ce-type": "com.example.bench", "content-type": "application/json"})
                r = await client.post(
                    url, content=json.dumps({"n": n, "payload": "x" * 100}), headers=headers
                )
                r.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return events / (time.perf_counter() - started)


async def plain_transport_loop(
    url: str, events: int, concurrency: int, cpu: list[float] | None = None
) -> float:
    """Deliveries/s of a bare loop over the broker's own HTTP transport (aiohttp; the ceiling);
    the CPU seconds it took are appended to ``cpu``."""
    _freeze()
    transport = HttpTransport()
    spent = time.process_time()
    counter = iter(range(events))

    async def worker() -> None:
        for n in counter:
            headers = {"ce-specversion": "1.0", "ce-id": f"t-{n}", "ce-source": "/bench"}
            headers.update({"ce-type": "com.example.bench", "content-type": "application/json"})
            body = json.dumps({"n": n, "payload": "x" * 100}).encode()
            r = await transport.request("POST", url, headers, body, deadline=10)
            assert 200 <= r.status < 300

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = events / (time.perf_counter() - started)
    if cpu is not None:
        cpu.append(time.process_time() - spent)
    await transport.aclose()
    return rate


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of both sides")
    parser.add_argument("--httpx", action="store_true", help="also time a plain httpx.AsyncClient loop")
    args = parser.parse_args()
    load = os.getloadavg()
    target = sink()
    rates: list[tuple[float, float]] = []
    cpus: list[tuple[float, float]] = []
    baseline = None
    try:
        url = target.url + "/deliver"
        if args.httpx:
            baseline = asyncio.run(plain_loop(url, args.events, args.concurrency))
        for r in range(args.rounds):
            # The two sides alternate which goes first, so that neither always follows the
            # other's after-effects (the log's preload writes, the sink's warm connections).
            rate = ceiling = 0.0
            loop_cpu: list[float] = []
            broker_cpu: list[float] = []
            for side in ("loop", "broker") if r % 2 == 0 else ("broker", "loop"):
                httpx.get(target.url + "/reset")
                if side == "loop":
                    ceiling = asyncio.run(plain_transport_loop(url, args.events, args.concurrency, loop_cpu))
                    continue
                with tempfile.TemporaryDirectory() as tmp:
                    db = Path(tmp) / "bench.db"
                    rate = asyncio.run(broker_drain(db, url, args.events, args.concurrency, broker_cpu))
                received = sink_stats(target.url)["count"]
                if received < args.events:
                    raise SystemExit(f"the sink got {received:.0f} of {args.events} deliveries")
            per_loop, per_broker = (c[0] / args.events * 1e6 for c in (loop_cpu, broker_cpu))
            rates.append((rate, ceiling))
            cpus.append((per_broker, per_loop))
            print(
                f"   round {r + 1}: broker {rate:.0f}/s, {per_broker:.0f} us; transport loop {ceiling:.0f}/s,"
                f" {per_loop:.0f} us; rate ratio {rate / ceiling:.2f}, CPU ratio {per_loop / per_broker:.2f}",
                flush=True,
            )
    finally:
        target.stop()
    rate, ceiling = _median([b for b, _ in rates]), _median([c for _, c in rates])
    per_broker, per_loop = _median([b for b, _ in cpus]), _median([c for _, c in cpus])
    ratios = [b / c for b, c in rates]
    print(
        f"3. HTTP push deliveries ({args.events} events, concurrency {args.concurrency}, one process,"
        f" {args.rounds} alternated rounds, medians)"
    )
    if baseline is not None:
        print(f"   plain httpx loop   : {baseline:9.0f} deliveries/s   (broker/httpx {rate / baseline:.2f})")
    print(
        f"   transport loop     : {ceiling:9.0f} deliveries/s   (the broker's aiohttp transport, no pipeline)"
    )
    print(f"   broker pipeline    : {rate:9.0f} deliveries/s   (target >= 3,000/s per core)")
    print(
        f"   ratio broker/loop  : {_median(ratios):9.2f}   (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
    )
    print(
        f"   CPU per delivery   : broker {per_broker:.0f} us, transport loop {per_loop:.0f} us,"
        f" ratio loop/broker {_median([c / b for b, c in cpus]):.2f}   (this process, all threads)"
    )
    print(f"   load average (1 min): {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
