"""Benchmark 3: HTTP push deliveries per second to a local sink, and the ratios to two bare
client loops against the same sink with the same concurrency, in the same run: a plain
``httpx.AsyncClient`` loop and a loop over the broker's own transport (the aiohttp session
:mod:`ceprotocols.http.transport` configures, without the pipeline: the ceiling).

The broker side is measured on its own: N events for one subscription are first written to
the durable log, then the pipeline starts and drains them (page loads from the log, lane
workers, the HTTP sender, completion writes), timed until the log is empty. The broker runs in
this one process (one core for the event loop plus the log writer thread); the sink is a
separate process. Before each side is measured, the garbage collector gets the policy
``cebroker serve`` gives it after its start-up (what the process holds so far is frozen out of
its scans, and the young generation is collected less often): both sides are measured alike.
Usage: ``python benchmarks/bench_delivery.py [--events 20000] [--concurrency 32]``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    load = os.getloadavg()
    target = sink()
    try:
        url = target.url + "/deliver"
        baseline = asyncio.run(plain_loop(url, args.events, args.concurrency))
        loop_cpu: list[float] = []
        ceiling = asyncio.run(plain_transport_loop(url, args.events, args.concurrency, loop_cpu))
        httpx.get(target.url + "/reset")
        broker_cpu: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            rate = asyncio.run(broker_drain(db, url, args.events, args.concurrency, broker_cpu))
        received = sink_stats(target.url)["count"]
    finally:
        target.stop()
    print(f"3. HTTP push deliveries ({args.events} events, concurrency {args.concurrency}, one process)")
    print(f"   plain httpx loop   : {baseline:9.0f} deliveries/s")
    print(
        f"   transport loop     : {ceiling:9.0f} deliveries/s   (the broker's aiohttp transport, no pipeline)"
    )
    print(
        f"   broker pipeline    : {rate:9.0f} deliveries/s"
        f"   (target >= 3,000/s per core; sink got {received:.0f})"
    )
    print(f"   ratio broker/httpx : {rate / baseline:9.2f}")
    print(f"   ratio broker/loop  : {rate / ceiling:9.2f}")
    per_loop, per_broker = (c[0] / args.events * 1e6 for c in (loop_cpu, broker_cpu))
    print(
        f"   CPU per delivery   : broker {per_broker:.0f} us, transport loop {per_loop:.0f} us,"
        f" ratio loop/broker {per_loop / per_broker:.2f}   (this process, all threads)"
    )
    print(f"   load average (1 min): {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
