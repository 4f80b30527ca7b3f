"""Benchmark: ingest with the archive on (``--retention 24h``, the default) against off
(``--retention 0``), in the same run, and what the archive costs per event.

Two ``cebroker serve`` processes side by side, one with the archive and one without, loaded in
turn round after round with the same load: batch ingress (1000 events a request, 4
connections) and single structured events (32 connections). Two cases: events that match no
subscription (the archive's worst case: without it nothing but the de-duplication key is
written) and events that match one rate-limited subscription (stored either way, as
``bench_ingress.py`` does). Afterwards the archive's own count of the JSON bytes it holds per
event, and the database file per accepted event of each broker once it has stopped (its WAL
checkpointed into the file). Prints rates, ratios and the load average.
Usage: ``python benchmarks/bench_retention.py [--rounds 3] [--seconds 3]``.
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
from drains import uptime
from harness import Child, broker, load, request_bytes

BATCH = {"Content-Type": "application/cloudevents-batch+json"}
STRUCTURED = {"Content-Type": "application/cloudevents+json"}


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


def _batches(port: int, run: str) -> Callable[[int], bytes]:
    def make(n: int) -> bytes:
        body = json.dumps([_event(n * 1000 + k, run) for k in range(1000)]).encode()
        return request_bytes("/events", body, BATCH, port)

    return make


def _singles(port: int, run: str) -> Callable[[int], bytes]:
    return lambda n: request_bytes("/events", json.dumps(_event(n, run)).encode(), STRUCTURED, port)


def _rates(server: Child, run: str, seconds: float) -> tuple[float, float]:
    """(batch events/s, single events/s) of one round against ``server``."""
    many = asyncio.run(load(server.port, _batches(server.port, f"b{run}"), concurrency=4, seconds=seconds))
    one = asyncio.run(load(server.port, _singles(server.port, f"s{run}"), concurrency=32, seconds=seconds))
    return many.statuses.get(202, 0) * 1000 / many.seconds, one.statuses.get(202, 0) / one.seconds


def _case(tmp: Path, name: str, matched: bool, args: argparse.Namespace) -> dict[str, object]:
    servers = {
        "on": broker(tmp / f"{name}-on.db", webhook_validation="off"),
        "off": broker(tmp / f"{name}-off.db", webhook_validation="off", retention="0"),
    }
    results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    archive: dict[str, object] = {}
    accepted: dict[str, float] = {}
    try:
        if matched:
            sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
            for server in servers.values():
                assert httpx.post(server.url + "/subscriptions", json=sub).status_code == 201
        for r in range(args.rounds):
            for mode, server in servers.items():
                results[mode].append(_rates(server, f"{mode}{r}", args.seconds))
        archive = httpx.get(servers["on"].url + "/status").json()["archive"]
        for mode, server in servers.items():
            accepted[mode] = httpx.get(server.url + "/status").json()["events"]["accepted"]
    finally:
        for server in servers.values():
            server.stop()
    sizes = {mode: (tmp / f"{name}-{mode}.db").stat().st_size for mode in servers}
    return {"results": results, "archive": archive, "accepted": accepted, "sizes": sizes}


def _report(title: str, case: dict[str, object]) -> None:
    results = case["results"]
    assert isinstance(results, dict)
    print(title)
    for index, kind in ((0, "batch ingress (1000 a request)"), (1, "single events (32 connections)")):
        on = [r[index] for r in results["on"]]
        off = [r[index] for r in results["off"]]
        ratios = [a / b for a, b in zip(on, off, strict=True)]
        print(
            f"   {kind:31}: archive on {statistics.median(on):8.0f} ev/s, off {statistics.median(off):8.0f}"
            f" ev/s, ratio {statistics.median(ratios):.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    archive, accepted, sizes = case["archive"], case["accepted"], case["sizes"]
    assert isinstance(archive, dict)
    assert isinstance(accepted, dict)
    assert isinstance(sizes, dict)
    per_event_json = archive["bytes"] / max(1, archive["events"])
    on_disk = sizes["on"] / max(1, accepted["on"])
    off_disk = sizes["off"] / max(1, accepted["off"])
    print(
        f"   archive: {archive['events']} events, {per_event_json:.0f} bytes of JSON each; database file"
        f" {on_disk:.0f} bytes per accepted event with the archive, {off_disk:.0f} without"
        f" ({on_disk - off_disk:.0f} more)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per load, round and server")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    with tempfile.TemporaryDirectory() as tmp:
        unmatched = _case(Path(tmp), "unmatched", False, args)
        matched = _case(Path(tmp), "matched", True, args)
    print(f"load after:  {uptime()}")
    _report("ingest, events matching no subscription (the archive's worst case)", unmatched)
    _report("ingest, events matching one subscription (stored either way)", matched)


if __name__ == "__main__":
    main()
