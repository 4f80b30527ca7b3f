"""Benchmark of the SQLite subscription store; prints figures, asserts nothing.

    .venv/bin/python tests/storage/bench_store.py [--subscriptions N]

Measures durable creates (one fsync'd transaction each, sequential and 16 concurrent writers),
point reads, and a ``type=`` query through the indexed side table against the baseline of
loading every subscription and filtering in Python, in the same run on the same file.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

from cebroker.storage import SubscriptionQuery, create_storage
from cebroker.subscription import Subscription


def _sub(i: int) -> Subscription:
    return Subscription(
        id=f"sub-{i:06d}",
        protocol="HTTP",
        sink=f"https://sink.example/{i}",
        source=f"/source/{i % 50}",
        types=(f"com.example.type{i % 100}", "com.example.common"),
        filters=({"prefix": {"subject": f"s{i % 7}/"}},),
        protocolsettings={"method": "POST"},
    )


async def _timed(label: str, count: int, work: Awaitable[None]) -> float:
    start = time.perf_counter()
    await work
    elapsed = time.perf_counter() - start
    print(f"{label:<44} {count:>7} ops  {elapsed:8.3f} s  {count / elapsed:10.0f} ops/s")
    return elapsed


async def main(total: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = create_storage(Path(tmp) / "bench.db")
        await storage.open()
        store = storage.subscriptions
        try:
            seq = min(total, 500)

            async def sequential() -> None:
                for i in range(seq):
                    await store.create(_sub(i))

            await _timed("create, sequential (1 commit each)", seq, sequential())

            async def concurrent() -> None:
                async def writer(w: int) -> None:
                    for i in range(seq + w, total, 16):
                        await store.create(_sub(i))

                await asyncio.gather(*(writer(w) for w in range(16)))

            await _timed("create, 16 concurrent writers", total - seq, concurrent())

            ids = [f"sub-{i:06d}" for i in range(0, total, max(1, total // 1000))]

            async def reads() -> None:
                for sid in ids:
                    assert await store.get(sid) is not None

            await _timed("get by id", len(ids), reads())

            rounds = 50
            wanted = [f"com.example.type{r % 100}" for r in range(rounds)]
            indexed: list[float] = []
            scanned: list[float] = []
            found: list[list[str]] = []
            for t in wanted:
                t0 = time.perf_counter()
                page = await store.query(SubscriptionQuery(type=t, limit=1000))
                indexed.append(time.perf_counter() - t0)
                found.append([s.id for s in page.items])
            for t, ids_found in zip(wanted, found, strict=True):
                t0 = time.perf_counter()
                baseline = [s.id for s in await store.all() if s.types and t in s.types]
                scanned.append(time.perf_counter() - t0)
                assert ids_found == baseline[:1000]
            idx, scan = statistics.median(indexed), statistics.median(scanned)
            print(f"query type= ({total // 100} of {total} match), indexed     median {idx * 1000:8.2f} ms")
            print(f"baseline: load all + filter in Python            median {scan * 1000:8.2f} ms")
            print(f"speed-up of the index over the scan: {scan / idx:.1f}x")
        finally:
            await storage.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=5000)
    asyncio.run(main(parser.parse_args().subscriptions))
