"""Benchmark 5: resident memory of a broker process with 100,000 subscriptions loaded (index
built, pipeline ready), next to the same broker with none, measured in the same run.

Subscriptions are written straight into the store (public ``SubscriptionStore.create``) in a
database under /dev/shm, so setting up does not wait for 100,000 fsyncs; the broker then starts
on that file like after any restart. Filters vary: exact type, source, prefix and a CESQL
expression, in equal parts.
Usage: ``python benchmarks/bench_memory.py [--subscriptions 100000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import broker

from cebroker.storage import create_storage
from cebroker.subscription import Subscription


def _subscription(i: int) -> Subscription:
    kind = i % 4
    fields: dict[str, Any] = {}
    if kind == 0:
        fields["types"] = (f"com.example.type{i}",)
    elif kind == 1:
        fields["source"] = f"/sources/{i}"
    elif kind == 2:
        fields["filters"] = ({"prefix": {"subject": f"orders/{i}/"}},)
    else:
        fields["filters"] = ({"sql": f"type = 'com.example.t{i}' AND amount > {i % 100}"},)
    return Subscription(id=f"sub-{i:06d}", protocol="HTTP", sink=f"http://127.0.0.1:9/s{i}", **fields)


async def populate(db: Path, count: int) -> None:
    storage = create_storage(db)
    await storage.open()
    for i in range(count):
        await storage.subscriptions.create(_subscription(i))
    await storage.close()


def measure(db: Path) -> tuple[float, float]:
    """RSS (MiB) of a broker on ``db`` once ready, and its start-up time in seconds."""
    started = time.perf_counter()
    server = broker(db, webhook_validation="off")
    elapsed = time.perf_counter() - started
    try:
        return server.rss_mib(), elapsed
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscriptions", type=int, default=100_000)
    args = parser.parse_args()
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        empty, _ = measure(Path(tmp) / "empty.db")
        db = Path(tmp) / "full.db"
        started = time.perf_counter()
        asyncio.run(populate(db, args.subscriptions))
        setup = time.perf_counter() - started
        full, startup = measure(db)
    per = (full - empty) * 1024 / args.subscriptions
    print(f"5. broker RSS with {args.subscriptions} subscriptions (store populated in {setup:.0f} s)")
    print(f"   empty broker        : {empty:7.1f} MiB")
    print(
        f"   with subscriptions  : {full:7.1f} MiB"
        f"   ({per:.2f} KiB per subscription; ready in {startup:.1f} s)"
    )


if __name__ == "__main__":
    main()
