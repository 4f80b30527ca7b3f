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
* the same again with passive WAL checkpoints only (the truncation bound out of reach too): the
  previous release's behaviour;
* the healthy delivery rate: the same number of pending deliveries drained by the broker's
  pipeline from its log to the same sink while it answers 204 (as ``bench_delivery.py`` does).

Each window starts once the ingest's WAL has been checkpointed and cut back (or after 20 s), so
that its growth is the outage's own.

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
HELD_CLOSED = "import cebroker.pipeline.dispatch.circuits as circuits; circuits.OPEN_AFTER = 10**12; "
#: ... and with passive checkpoints only, as the previous release had them.
PASSIVE_ONLY = "import cebroker.storage.sqlite.database as database; database.JOURNAL_SIZE_LIMIT = 1 << 40; "
RUN = "import sys; from cebroker.cli import main; sys.exit(main(sys.argv[1:]))"
#: How the broker is started for each kind of run.
MODES = {"circuit": None, "held": HELD_CLOSED + RUN, "before": HELD_CLOSED + PASSIVE_ONLY + RUN}


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


def wal(db: Path) -> int:
    path = db.with_name(db.name + "-wal")
    return path.stat().st_size if path.exists() else 0


def serve(db: Path, mode: str) -> Child:
    port = free_port()
    flags = ["serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    flags += ["--webhook-validation", "off"]
    code = MODES[mode]
    args = ["-m", "cebroker", *flags] if code is None else ["-c", code, *flags]
    return Child(args, port, "/readyz")


@dataclass
class Outage:
    attempts_per_s: float
    growth_per_min: float
    peak: int
    drain: float | None = None


def outage(size: int, window: float, mode: str) -> Outage:
    target = sink()
    httpx.get(target.url + "/down")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "outage.db"
        broker = serve(db, mode)
        try:
            client = httpx.Client(base_url=broker.url, timeout=120)
            sub = client.post(
                "/subscriptions", json={"protocol": "HTTP", "sink": target.url + "/hook"}
            ).json()
            status = f"/subscriptions/{sub['id']}/status"
            for first in range(0, size, 1000):
                batch = [_event(n) for n in range(first, min(size, first + 1000))]
                assert client.post("/events", content=orjson.dumps(batch), headers=BATCH).status_code == 202
            if mode == "circuit":
                while client.get(status).json()["circuit"]["state"] == "closed":
                    time.sleep(0.05)
            settled = time.monotonic() + 20
            time.sleep(1.0)  # the attempts in flight end
            while wal(db) > 1024 * 1024 and time.monotonic() < settled:
                time.sleep(0.1)
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
            if mode == "circuit":
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
    mib = 1024 * 1024
    print("attempts/s and MiB/min over the window, peak MiB above its start")
    print(
        f"{'pending':>8} | {'circuit':^26} | {'circuit held closed':^26} | {'held closed, passive WAL':^26}"
        f" | {'drain s':>7} {'healthy s':>9} {'rate/s':>7}"
    )
    for size in (int(text) for text in args.sizes.split(",")):
        runs = {
            mode: outage(size, args.window if mode == "circuit" else args.baseline_window, mode)
            for mode in MODES
        }
        rate = healthy_rate(size)
        cells = " | ".join(
            f"{r.attempts_per_s:>8.2f} {r.growth_per_min / mib:>8.2f} {r.peak / mib:>8.2f}"
            for r in runs.values()
        )
        drain = runs["circuit"].drain or 0.0
        print(f"{size:>8} | {cells} | {drain:>7.2f} {size / rate:>9.2f} {rate:>7.0f}", flush=True)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
