"""Shared pieces of the benchmark scripts: a lean HTTP/1.1 load generator, a counting sink
process, the broker as a child process, the in-process pipeline drain and small reporting
helpers.

The load generator speaks keep-alive HTTP/1.1 over raw asyncio streams, so that on a small
machine the client costs far less CPU than the server it measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cebroker.pipeline.component import PipelineComponent
from cebroker.sealing.keys import new_key, write_key_file
from cebroker.settings import Settings
from cebroker.storage import Incoming, create_storage
from cebroker.subscription import Subscription

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request_bytes(path: str, body: bytes, headers: dict[str, str], port: int) -> bytes:
    """One serialized HTTP/1.1 POST request."""
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@dataclass
class LoadResult:
    """What a load run measured."""

    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def _connection(
    port: int, make: Callable[[int], bytes], deadline: float, result: LoadResult, counter: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline:
            counter[0] += 1
            payload = make(counter[0])
            started = time.perf_counter()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            result.latencies.append(time.perf_counter() - started)
            result.requests += 1
            result.statuses[status] = result.statuses.get(status, 0) + 1
    finally:
        writer.close()


async def load(port: int, make: Callable[[int], bytes], *, concurrency: int, seconds: float) -> LoadResult:
    """Send requests from ``concurrency`` keep-alive connections for ``seconds``."""
    result = LoadResult()
    counter = [0]
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_connection(port, make, deadline, result, counter) for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


class Child:
    """A Python child process serving HTTP on ``port``; waits for ``ready_path`` to answer 200."""

    def __init__(
        self, args: list[str], port: int, ready_path: str, env: dict[str, str] | None = None
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + ready_path, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{args} did not start")

    def rss_mib(self) -> float:
        """Resident set size of the child, MiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        """CPU time the child has used so far (user + system, all its threads), seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_KEYS = Path(tempfile.mkdtemp(prefix="cebroker-bench-keys-"))


def _secrets_key() -> Path:
    """The secrets key file every broker of this benchmark run shares (one database, one key)."""
    path = _KEYS / "secrets.key"
    if not path.exists():
        write_key_file(path, (new_key(),), exclusive=True)
    return path


def broker(db: Path | str, *, tree: Path | None = None, **flags: str) -> Child:
    """``cebroker serve`` on a free port with ``db`` (a file or a database URL); flags as
    ``--name value``; the code of ``tree`` (an earlier commit's checkout) when given."""
    port = free_port()
    args = ["-m", "cebroker", "serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    if "://" in str(db) and "secrets_key" not in flags:
        # A database URL has no file beside which the broker keeps its secrets key.
        args += ["--secrets-key-file", str(_secrets_key())]
    for name, value in flags.items():
        args += [f"--{name.replace('_', '-')}", value]
    env = (
        None
        if tree is None
        else {"PYTHONPATH": ":".join(str(tree / p) for p in ("src", "filters", "protocols"))}
    )
    return Child(args, port, "/readyz", env=env)


def sink() -> Child:
    """The counting sink of ``benchmarks/sink.py`` on a free port."""
    port = free_port()
    return Child([str(ROOT / "benchmarks" / "sink.py"), str(port)], port, "/count")


_polls: dict[str, httpx.Client] = {}


def sink_stats(url: str) -> dict[str, float]:
    """Count and latency figures the sink has gathered (one kept-alive client per sink, so that
    polling costs the benchmark process little CPU)."""
    if url not in _polls:
        _polls[url] = httpx.Client(base_url=url)
    return dict(json.loads(_polls[url].get("/count").text))


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, from /proc, by thread id
    and name: ``"<tid> <name>"``, the name the Python thread's (``event loop`` for the main
    thread), else the kernel's."""
    names = {thread.native_id: thread.name for thread in threading.enumerate() if thread.native_id}
    names[threading.main_thread().native_id or os.getpid()] = "event loop"
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for entry in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{entry}/stat", encoding="ascii") as f:
                head, _, tail = f.read().rpartition(")")
        except OSError:
            continue  # ended meanwhile
        fields = tail.split()
        name = names.get(int(entry)) or head.partition("(")[2]
        found[f"{entry} {name}"] = (int(fields[11]) + int(fields[12])) / ticks
    return found


async def pipeline_drain(
    db: Path,
    sub: Subscription,
    events: int,
    incoming: Callable[[int], Incoming],
    cpu: list[float] | None = None,
    threads: dict[str, float] | None = None,
) -> float:
    """Deliveries/s of the broker's pipeline, in this process, draining ``events`` deliveries.

    ``sub`` is created in a fresh store in ``db`` and ``incoming(n)`` (n = 0..events-1) written
    to the durable log first; then the pipeline starts and is timed until nothing is pending.
    The CPU seconds this process spent draining (all threads) are appended to ``cpu``; those of
    each thread (:func:`thread_cpu`, in clock ticks, the event loop's from
    ``time.thread_time()``) are added to ``threads``.
    """
    settings = Settings(db=db, webhook_validation=False)
    storage = create_storage(db)
    await storage.open()
    await storage.subscriptions.create(sub)
    for start in range(0, events, 1000):
        await storage.deliveries.append([incoming(n) for n in range(start, min(events, start + 1000))])

    component = PipelineComponent(
        settings, storage.subscriptions, storage.deliveries, storage.circuits, claims=storage.claims
    )
    before = thread_cpu() if threads is not None else {}
    started, spent, own = time.perf_counter(), time.process_time(), time.thread_time()
    await component.start()
    for _ in range(600_000):  # polled: the dispatcher has no "drained" event; ten minutes at most
        if not component.dispatcher.pending:
            break
        # Every 10 ms while many are pending, every millisecond near the end. Polled every 10 ms
        # throughout, the end was seen 5 ms late on average: 5 % of a 3,000-delivery drain at
        # 30,000/s.
        await asyncio.sleep(0.01 if component.dispatcher.pending > 1000 else 0.001)
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append(time.process_time() - spent)
    if threads is not None:
        threads["event loop"] = threads.get("event loop", 0.0) + time.thread_time() - own
        for key, seconds in thread_cpu().items():
            name = key.partition(" ")[2]
            if name != "event loop":
                threads[name] = threads.get(name, 0.0) + seconds - before.get(key, 0.0)
    await component.stop()
    await storage.close()
    return events / elapsed


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")
