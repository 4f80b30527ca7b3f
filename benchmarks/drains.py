"""The broker's pipeline in this process, for the delivery benchmarks of archive and replay,
ordered and batched delivery: a storage of its own (SQLite, or a PostgreSQL URL), subscriptions,
events written straight to the durable log, and timed drains of what the dispatcher and the
replayer deliver. The sink is another process (``harness.sink``)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx
from harness import sink, sink_stats

from cebroker.pipeline.component import PipelineComponent
from cebroker.settings import Settings
from cebroker.storage import Incoming, Storage, StorageOptions, create_storage
from cebroker.storage.archive import ReplayRequest
from cebroker.subscription import Subscription

#: Events written to the log per append while preparing a run.
CHUNK = 1000


#: One round's figures.
R = TypeVar("R")


def options(description: str | None, events: int) -> argparse.ArgumentParser:
    """The options every in-process delivery benchmark takes; a script adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, default=events)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", help="a PostgreSQL URL (default: a SQLite file)")
    return parser


def run_rounds(
    args: argparse.Namespace,
    measure: Callable[[Path | str, str, str, argparse.Namespace], Coroutine[Any, Any, list[R]]],
) -> list[R]:
    """``measure(db, url, sink_url, args)``'s rounds against a counting sink (its ``/deliver``
    the subscriptions' sink), on ``--db`` or a SQLite file of its own; the load before and
    after printed."""
    print(f"load before: {uptime()}")
    target = sink()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db: Path | str = args.db or Path(tmp) / "bench.db"
            rounds = asyncio.run(measure(db, target.url + "/deliver", target.url, args))
    finally:
        target.stop()
    print(f"load after:  {uptime()}")
    return rounds


def median_round(rounds: list[R], ratio: Callable[[R], float]) -> tuple[float, list[float], R]:
    """The median of the rounds' ratios, every ratio, and the round of the median (the first
    round when the median falls between two)."""
    ratios = [ratio(r) for r in rounds]
    median = statistics.median(ratios)
    return median, ratios, rounds[ratios.index(median)] if median in ratios else rounds[0]


def uptime() -> str:
    """``uptime``'s line: the load average the figures were measured under."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def event(n: int, run: str, **extra: object) -> dict[str, object]:
    """A small event (about 200 bytes of JSON)."""
    return {
        "specversion": "1.0",
        "id": f"{run}-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "datacontenttype": "application/json",
        "data": {"n": n, "payload": "x" * 100},
        **extra,
    }


class InProcess:
    """One pipeline over one storage (``db``: a SQLite path or a PostgreSQL URL)."""

    def __init__(self, db: Path | str, *, retention: float = 86_400.0) -> None:
        self.db = db
        self.retention = retention
        self.storage: Storage = create_storage(db, StorageOptions(retention=retention))
        self.component: PipelineComponent | None = None
        #: The process's CPU time per event of the last :meth:`delivery_rate` (every thread).
        self.last_cpu = 0.0

    async def open(self, *subscriptions: Subscription) -> None:
        await self.storage.open()
        for sub in subscriptions:
            await self.storage.subscriptions.create(sub)

    async def append(self, items: list[Incoming]) -> None:
        """Write ``items`` to the log, and, once the pipeline runs, hand their deliveries to the
        dispatcher as an ingest does."""
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            written = await self.storage.deliveries.append(chunk)
            if self.component is not None:
                events = [dict(item.event) for item in chunk if isinstance(item.event, dict)]
                self.component.dispatcher.accept(events, written)

    async def start(self) -> PipelineComponent:
        """Start the pipeline: it resumes every delivery pending in the log."""
        settings = Settings(db=self.db, webhook_validation=False, retention=self.retention)
        self.component = PipelineComponent(
            settings,
            self.storage.subscriptions,
            self.storage.deliveries,
            self.storage.circuits,
            archive=self.storage.archive,
            claims=self.storage.claims,
        )
        await self.component.start()
        return self.component

    async def drained(self) -> None:
        """Return once no delivery is pending (polled: the dispatcher has no such event)."""
        assert self.component is not None
        for _ in range(120_000):  # ten minutes at most
            if not self.component.dispatcher.pending:
                return
            await asyncio.sleep(0.005)
        raise RuntimeError("the deliveries did not drain in ten minutes")

    async def delivery_rate(self, subscription: str, events: list[dict[str, Any]], sink_url: str) -> float:
        """Deliveries/s of ``events``, written to the log for ``subscription`` alone and delivered
        by a pipeline started for the run; the sink (reset first) must have got every one."""
        batch = [Incoming(e, str(e["source"]), str(e["id"]), (subscription,)) for e in events]
        await asyncio.to_thread(httpx.get, sink_url + "/reset")
        await self.append(batch)
        started, cpu = time.perf_counter(), time.process_time()
        await self.start()
        await self.drained()
        rate = len(events) / (time.perf_counter() - started)
        self.last_cpu = (time.process_time() - cpu) / len(events)
        await self.stop()
        stats = await asyncio.to_thread(sink_stats, sink_url)
        if stats["count"] < len(events):
            raise RuntimeError(f"the sink got {stats['count']} of {len(events)} events")
        return rate

    async def replay(self, subscription: str, replay_id: str, since: float) -> float:
        """Seconds from the creation of a replay of everything since ``since`` to its end."""
        assert self.component is not None
        assert self.component.replayer is not None
        started = time.perf_counter()
        request = ReplayRequest(id=replay_id, subscription=subscription, since=since, until=time.time())
        self.component.replayer.started(await self.storage.archive.create_replay(request))
        for _ in range(120_000):  # ten minutes at most
            (state,) = [r for r in await self.storage.archive.replays(subscription) if r.id == replay_id]
            if state.state == "done":
                return time.perf_counter() - started
            await asyncio.sleep(0.005)
        raise RuntimeError("the replay did not end in ten minutes")

    async def stop(self) -> None:
        """Stop the pipeline (the storage stays open)."""
        if self.component is not None:
            await self.component.stop()
            self.component = None

    async def close(self) -> None:
        await self.stop()
        await self.storage.close()
