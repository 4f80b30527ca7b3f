"""Where a batch ingest spends its time: microseconds per event for each stage, in process
(no HTTP), so that the batch ingress figure can be read against its parts.

Stages: JSON decode of a 1000-event body (orjson), validation, matching against one
subscription, and the durable append (one transaction per batch, fsync included).
Usage: ``python benchmarks/profile_ingest.py [--batches 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import orjson

from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.wellformed import event_problems, normalize
from cebroker.storage import Incoming, create_storage
from cebroker.subscription import Subscription


def _event(n: int) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"p-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "time": "2024-05-01T10:00:00Z",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
    }


async def run(batches: int) -> dict[str, float]:
    matcher = Matcher()
    matcher.load([Subscription(id="s1", protocol="HTTP", sink="http://127.0.0.1:9/")])
    bodies = [orjson.dumps([_event(b * 1000 + k) for k in range(1000)]) for b in range(batches)]
    spent = dict.fromkeys(("decode", "validate", "match", "append"), 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        storage = create_storage(Path(tmp) / "p.db")
        await storage.open()
        journal = storage.deliveries
        for body in bodies:
            t0 = time.perf_counter()
            events = orjson.loads(body)
            t1 = time.perf_counter()
            assert not any(event_problems(e, "/0") for e in events)
            clean = [normalize(e) for e in events]
            t2 = time.perf_counter()
            items = [Incoming(e, e["source"], e["id"], matcher.match(e)) for e in clean]
            t3 = time.perf_counter()
            await journal.append(items)
            t4 = time.perf_counter()
            for stage, took in zip(spent, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                spent[stage] += took
        await storage.close()
    return {stage: took / (batches * 1000) * 1e6 for stage, took in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    per_event = asyncio.run(run(args.batches))
    total = sum(per_event.values())
    print("batch ingest, microseconds per event by stage (in process, no HTTP)")
    for stage, micros in per_event.items():
        print(f"   {stage:9s}: {micros:6.2f} us  ({micros / total:4.0%})")
    print(f"   total    : {total:6.2f} us  -> at most {1e6 / total:,.0f} events/s on one core before HTTP")


if __name__ == "__main__":
    main()
