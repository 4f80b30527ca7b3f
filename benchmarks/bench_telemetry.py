"""What telemetry costs: ingest and delivery with telemetry off against the previous release, and
with traces on (sampling 1.0) against off, all measured in the same run.

Three ``cebroker serve`` processes run side by side, each over its own SQLite file:

* **base**: the previous release's tree (``--base``: the commit before telemetry), checked out
  with ``git worktree`` into a temporary directory and imported from there (``PYTHONPATH``), so
  it runs the old code with the same interpreter and libraries (checked: its ``/metrics`` lacks
  the HTTP request metrics this tree adds);
* **off**: this tree, telemetry off (no OTLP endpoint);
* **on**: this tree, exporting every span (``OTEL_TRACES_SAMPLER=always_on``) to a counting
  sink standing in for a collector (``benchmarks/sink.py`` answers every POST with 204).

Per round, in turn for each broker: single-event structured ingest (events/s) and batch ingest
(``--batch`` events per request, events/s), with the load generator of ``harness.py``, every
event matching one rate-limited subscription (its deliveries do not compete for the CPU); then
delivery: ``--events`` events posted in batches to a subscription of the counting sink, timed
from the first post until the sink has them all (deliveries/s, ingest included). The ratios
off/base and on/off are taken per round; the medians are printed, with every round's ratio and
the load average before and after (the machine may be shared: read the ratios with it).
Usage: ``python benchmarks/bench_telemetry.py --base <commit> [--rounds 3] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from drains import event, uptime
from harness import ROOT, Child, free_port, load, request_bytes, sink, sink_stats

STRUCTURED = {"Content-Type": "application/cloudevents+json"}
BATCH = {"Content-Type": "application/cloudevents-batch+json"}
KINDS = ("base", "off", "on")
#: The subscription the ingest events match: rate-limited to a closed port, so its deliveries
#: (one attempt a second) cost nothing next to the ingest being measured.
IDLE = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "types": ["com.example.bench"]}
IDLE_CONFIG = {"ratelimit": "1"}


@contextmanager
def base_tree(commit: str) -> Iterator[Path]:
    """The tree of ``commit`` in a temporary directory (a detached git worktree), removed after."""
    where = Path(tempfile.mkdtemp(prefix="cebroker-base-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(where), commit], cwd=ROOT, check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False)
        shutil.rmtree(where, ignore_errors=True)


def serve(db: Path, *, tree: Path | None = None, env: dict[str, str] | None = None) -> Child:
    """``cebroker serve`` on a free port over ``db``; the code of ``tree`` when given."""
    port = free_port()
    args = ["-m", "cebroker", "serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    args += ["--webhook-validation", "off"]
    extra = dict(env or {})
    if tree is not None:
        extra["PYTHONPATH"] = ":".join(str(tree / part) for part in ("src", "filters", "protocols"))
    return Child(args, port, "/readyz", env=extra)


def subscribe(server: Child, counter: Child) -> None:
    """The two subscriptions of a measured broker: the idle one the ingest events match, and one
    of the counting sink ``counter`` for the deliveries (concurrency 32)."""
    created = httpx.post(server.url + "/subscriptions", json={**IDLE, "config": IDLE_CONFIG})
    assert created.status_code == 201, created.text
    target = {"protocol": "HTTP", "sink": f"{counter.url}/hook", "types": ["com.example.delivered"]}
    created = httpx.post(server.url + "/subscriptions", json={**target, "config": {"concurrency": 32}})
    assert created.status_code == 201, created.text


def _single(port: int, run: str) -> Callable[[int], bytes]:
    return lambda n: request_bytes("/events", json.dumps(event(n, run)).encode(), STRUCTURED, port)


def _batch(port: int, size: int, run: str) -> Callable[[int], bytes]:
    def make(n: int) -> bytes:
        body = json.dumps([event(n * size + k, run) for k in range(size)]).encode()
        return request_bytes("/events", body, BATCH, port)

    return make


async def ingest(
    server: Child, make: Callable[[int], bytes], per_request: int, args: argparse.Namespace
) -> float:
    """Events/s accepted (202) under load."""
    result = await load(server.port, make, concurrency=args.concurrency, seconds=args.seconds)
    bad = {status: n for status, n in result.statuses.items() if status != 202}
    if bad:
        raise RuntimeError(f"{server.url}: answers other than 202: {bad}")
    return result.rate * per_request


def deliver(server: Child, counter: Child, run: str, events: int) -> float:
    """Deliveries/s of ``events`` events to the counting sink, from the first post to the last
    arrival."""
    httpx.get(counter.url + "/reset")
    started = time.perf_counter()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for start in range(0, events, 500):
            batch = [
                event(n, run, type="com.example.delivered") for n in range(start, min(events, start + 500))
            ]
            response = http.post("/events", content=json.dumps(batch), headers=BATCH)
            if response.status_code != 202:
                raise RuntimeError(f"{server.url}: {response.status_code} {response.text[:200]}")
    deadline = time.monotonic() + 300
    while sink_stats(counter.url)["count"] < events:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.url}: the deliveries did not all arrive")
        time.sleep(0.02)
    return events / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base", required=True, help="the previous release's commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--events", type=int, default=3000)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    results: dict[str, dict[str, list[float]]] = {
        k: {"single": [], "batch": [], "delivery": []} for k in KINDS
    }
    with base_tree(args.base) as tree, tempfile.TemporaryDirectory() as tmp:
        collector = sink()
        sinks = {kind: sink() for kind in KINDS}
        on_env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_TRACES_SAMPLER": "always_on",
            "OTEL_METRICS_EXPORTER": "none",
        }
        servers = {
            "base": serve(Path(tmp) / "base.db", tree=tree),
            "off": serve(Path(tmp) / "off.db"),
            "on": serve(Path(tmp) / "on.db", env=on_env),
        }
        try:
            metrics = httpx.get(servers["base"].url + "/metrics").text
            if "cebroker_http_server_request_duration_seconds" in metrics:
                raise RuntimeError("the base broker runs this tree's code, not the base's")
            for kind, server in servers.items():
                subscribe(server, sinks[kind])
            for r in range(args.rounds):
                order = KINDS if r % 2 == 0 else tuple(reversed(KINDS))
                for kind in order:
                    server = servers[kind]
                    run = f"{kind}{r}"
                    figures = results[kind]
                    figures["single"].append(
                        asyncio.run(ingest(server, _single(server.port, run + "s"), 1, args))
                    )
                    batch = _batch(server.port, args.batch, run + "b")
                    figures["batch"].append(asyncio.run(ingest(server, batch, args.batch, args)))
                    figures["delivery"].append(deliver(server, sinks[kind], run + "d", args.events))
            spans = sink_stats(collector.url)["requests"]
        finally:
            for child in [*servers.values(), *sinks.values(), collector]:
                child.stop()
    print(f"load after:  {uptime()}")
    print(
        f"{args.rounds} rounds of {args.seconds:g} s per load, concurrency {args.concurrency}, "
        f"batches of {args.batch}, {args.events} deliveries; base = {args.base}; "
        f"{spans} OTLP export requests from the traced broker"
    )
    for name, label in (
        ("single", "single-event ingest"),
        ("batch", "batch ingest"),
        ("delivery", "delivery"),
    ):
        rates = {kind: statistics.median(results[kind][name]) for kind in KINDS}
        off_base = [o / b for o, b in zip(results["off"][name], results["base"][name], strict=True)]
        on_off = [n / o for n, o in zip(results["on"][name], results["off"][name], strict=True)]
        shown = "  ".join(f"{kind} {rates[kind]:9.0f}" for kind in KINDS)
        print(f"  {label} (events/s, median): {shown}")
        print(f"     off/base {statistics.median(off_base):5.2f} (rounds {_listed(off_base)})")
        print(f"     on/off   {statistics.median(on_off):5.2f} (rounds {_listed(on_off)})")


def _listed(ratios: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in ratios)


if __name__ == "__main__":
    main()
