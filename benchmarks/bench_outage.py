"""Benchmark: a sink outage with 1k, 10k and 100k deliveries waiting.

For each backlog size, a real ``cebroker serve`` (a child process, fresh database) takes the
events in batches while its one subscription's sink (``benchmarks/sink.py``, another process)
answers 503, and then:

* **during the outage** (``--window`` seconds once the circuit is open): attempts per second the
  sink receives, and the growth of the database file plus its WAL, per minute (and the largest
  size seen above the start);
* **after recovery**: the sink answers 204 again; the time from the next probe to the last
  delivery confirmed, against the time the same backlog takes at the healthy delivery rate.

Baselines measured in the same run:

* the same outage with the circuit held closed (the broker started with its circuits' opening
  threshold out of reach, so every delivery follows its own retry backoff, as before circuits
  existed): attempts per second and database growth;
* the healthy delivery rate: the same number of pending deliveries drained by the broker's
  pipeline from its log to the same sink while it answers 204 (as ``bench_delivery.py`` does).

The load average (``/proc/loadavg``) is printed before and after: run it on a quiet machine.
Usage: ``python benchmarks/bench_outage.py [--sizes 1000,10000,100000] [--window 60]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import orjson
from harness import Child, free_port, pipeline_drain, sink, sink_stats

from cebroker.storage import Incoming
from cebroker.subscription import Subscription

BATCH = {"content-type": "application/cloudevents-batch+json"}
#: The broker with its circuits held closed: the baseline of per-delivery retries only.
HELD_CLOSED = (
    "import sys; import cebroker.pipeline.dispatch.circuits as circuits; "
    "circuits.OPEN_AFTER = 10**12; from cebroker.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _event(n: int) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"o-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def disk(db: Path) -> int:
    """The database file and its WAL, bytes."""
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def serve(db: Path, *, held_closed: bool) -> Child:
    port = free_port()
    flags = [
        "serve",
        "--port",
        str(port),
        "--db",
        str(db),
        "--log-level",
        "warning",
        "--webhook-validation",
        "off",
    ]
    args = ["-c", HELD_CLOSED, *flags] if held_closed else ["-m", "cebroker", *flags]
    return Child(args, port, "/readyz")


@dataclass
class Outage:
    attempts_per_s: float
    growth_per_min: float
    peak: int
    drain: float | None = None


def outage(size: int, window: float, *, held_closed: bool) -> Outage:
    target = sink()
    httpx.get(target.url + "/down")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "outage.db"
        broker = serve(db, held_closed=held_closed)
        try:
            client = httpx.Client(base_url=broker.url, timeout=120)
            sub = client.post(
                "/subscriptions", json={"protocol": "HTTP", "sink": target.url + "/hook"}
            ).json()
            status = f"/subscriptions/{sub['id']}/status"
            for first in range(0, size, 1000):
                batch = [_event(n) for n in range(first, min(size, first + 1000))]
                assert client.post("/events", content=orjson.dumps(batch), headers=BATCH).status_code == 202
            if not held_closed:
                while client.get(status).json()["circuit"]["state"] == "closed":
                    time.sleep(0.05)
            time.sleep(2.0)  # the attempts in flight end and the ingest's WAL is checkpointed
            attempts, start, started = sink_stats(target.url)["count"], disk(db), time.monotonic()
            peak = start
            while time.monotonic() - started < window:
                time.sleep(0.5)
                peak = max(peak, disk(db))
            elapsed = time.monotonic() - started
            result = Outage(
                (sink_stats(target.url)["count"] - attempts) / elapsed,
                (disk(db) - start) / elapsed * 60,
                peak - start,
            )
            if not held_closed:
                next_probe = client.get(status).json()["circuit"]["nextProbeAt"]
                httpx.get(target.url + "/up")
                probe_at = max(time.time(), datetime.fromisoformat(next_probe).timestamp())
                while client.get(status).json()["delivered"] < size:
                    time.sleep(0.02)
                result.drain = time.time() - probe_at
            client.close()
        finally:
            broker.stop()
            target.stop()
    return result


def healthy_rate(size: int) -> float:
    """Deliveries/s of the pipeline draining ``size`` pending deliveries to a sink that answers."""
    target = sink()
    sub = Subscription(id="bench", protocol="HTTP", sink=target.url + "/hook")

    def incoming(n: int) -> Incoming:
        e = _event(n)
        return Incoming(e, "/bench", str(e["id"]), ("bench",))

    try:
        with tempfile.TemporaryDirectory() as tmp:
            return asyncio.run(pipeline_drain(Path(tmp) / "healthy.db", sub, size, incoming))
    finally:
        target.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of outage measured")
    parser.add_argument("--baseline-window", type=float, default=30.0, help="the same, circuit held closed")
    args = parser.parse_args()
    print(f"load average before: {load_average()}")
    print(
        f"{'pending':>8} | {'attempts/s':>10} {'MiB/min':>8} {'peak MiB':>8} | held closed: "
        f"{'attempts/s':>10} {'MiB/min':>8} {'peak MiB':>8} | {'drain s':>7} {'healthy s':>9} {'rate/s':>7}"
    )
    mib = 1024 * 1024
    for size in (int(text) for text in args.sizes.split(",")):
        down = outage(size, args.window, held_closed=False)
        held = outage(size, args.baseline_window, held_closed=True)
        rate = healthy_rate(size)
        circuit = f"{down.attempts_per_s:>10.2f} {down.growth_per_min / mib:>8.2f} {down.peak / mib:>8.2f}"
        closed = f"{held.attempts_per_s:>10.1f} {held.growth_per_min / mib:>8.1f} {held.peak / mib:>8.1f}"
        drain = f"{down.drain or 0.0:>7.2f} {size / rate:>9.2f} {rate:>7.0f}"
        print(f"{size:>8} | {circuit} | {'':>13}{closed} | {drain}", flush=True)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
