"""The storage seen from outside, with real ``cebroker serve`` processes: one broker per SQLite
file, and a disk that fills up under batch ingest and frees up again (a file size limit set on
the broker process, raised from outside while it runs)."""

from __future__ import annotations

import asyncio
import math
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pipeline.helpers import event
from pipeline.servers import ServerThread, wait_until
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

BATCH = {"content-type": "application/cloudevents-batch+json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Serve:
    """``cebroker serve`` as a child process on a free port; ended by its own PID only."""

    def __init__(self, db: Path, log: Path, preexec: Callable[[], None] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cebroker", "serve", "--port", str(self.port), "--db", str(db)]
                + ["--webhook-validation", "off", "--log-level", "info"],
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec,
            )

    def ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited early:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"broker not ready in 30 s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    children: list[Serve] = []

    def start(db: Path, log: str, preexec: Callable[[], None] | None = None) -> Serve:
        child = Serve(db, tmp_path / log, preexec)
        children.append(child)
        return child

    yield start
    for child in children:
        child.stop()


class GatedSink:
    """An HTTP sink that holds every request until it is opened, then records its ``ce-id``."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.ids: list[str] = []
        self.url = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        await request.body()
        await asyncio.to_thread(self.open.wait)
        self.ids.append(request.headers.get("ce-id", ""))
        await Response(status_code=200)(scope, receive, send)


@pytest.fixture
def sink() -> Iterator[GatedSink]:
    gated = GatedSink()
    with ServerThread(gated) as server:
        gated.url = server.url
        try:
            yield gated
        finally:
            gated.open.set()


def test_a_second_broker_on_the_same_file_exits_at_once(
    tmp_path: Path, started: Callable[..., Serve]
) -> None:
    db = tmp_path / "data" / "broker.db"
    first = started(db, "first.log")
    first.ready()
    second = started(db, "second.log")
    code = second.proc.wait(timeout=30)
    text = second.log.read_text()
    assert code == 1, text
    assert f"the database {db} is in use by another broker (pid {first.proc.pid} on" in text
    assert "since " in text
    assert "Traceback" not in text
    assert httpx.get(f"{first.url}/readyz").status_code == 200  # the first one is unharmed
    first.stop()
    third = started(db, "third.log")  # the lock went with the first process
    third.ready()


@pytest.mark.slow
def test_a_full_disk_is_503_and_recovers_by_itself(
    tmp_path: Path, started: Callable[..., Serve], sink: GatedSink
) -> None:
    """Batch ingest into a broker whose files may not grow past 1 MiB (and whose sink holds every
    delivery, so nothing is freed): once commits fail, every answer is 503 with Retry-After
    (never a 500), readyz is not ready and names the cause, and the log has a warning and no
    traceback. When the limit is raised from outside, the broker is ready again without any
    request, and every event it answered 202 is delivered."""
    limit = 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    broker = started(tmp_path / "broker.db", "broker.log", small_disk)
    broker.ready()
    http = httpx.Client(base_url=broker.url, timeout=30)
    sub = {"protocol": "HTTP", "sink": f"{sink.url}/hook", "config": {"concurrency": "4", "timeout": "300"}}
    assert http.post("/subscriptions", json=sub).status_code == 201
    accepted: set[str] = set()
    refused: list[httpx.Response] = []
    refused_since = math.inf
    deadline = time.monotonic() + 120
    n = 0
    # Until the refusals have lasted longer than a few recovery probes: space the checkpoint of
    # the write-ahead log frees may let a batch in now and then before the files are full.
    while time.monotonic() - refused_since < 3:
        assert time.monotonic() < deadline, f"still accepting after {n} batches"
        n += 1
        batch = [event(n * 1000 + k, data={"pad": "x" * 200}) for k in range(200)]
        r = http.post("/events", json=batch, headers=BATCH)
        assert r.status_code in (202, 503), r.text
        if r.status_code == 202:
            accepted |= {e["id"] for e in batch}
            refused_since = math.inf
        else:
            refused.append(r)
            refused_since = min(refused_since, time.monotonic())
    assert accepted, "nothing was accepted before the storage filled up"
    for r in refused:
        problem = r.json()
        assert r.headers["content-type"] == "application/problem+json"
        assert int(r.headers["retry-after"]) >= 1
        assert problem["type"] == "https://cebroker.dev/problems/store-unavailable"
        assert "disk full" in problem["detail"] or "I/O error" in problem["detail"], problem
    ready = http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["detail"] in ("storage unavailable: disk full", "storage unavailable: I/O error")

    resource.prlimit(broker.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
    wait_until(lambda: http.get("/readyz").status_code == 200, timeout=30)
    last = [event(10**6 + k) for k in range(10)]
    assert http.post("/events", json=last, headers=BATCH).status_code == 202
    accepted |= {e["id"] for e in last}
    sink.open.set()
    wait_until(lambda: accepted <= set(sink.ids), timeout=120)
    http.close()
    broker.stop()
    log = broker.log.read_text()
    assert "Traceback" not in log
    assert " 500 " not in log
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert warnings
    assert all("cebroker.storage" in w and "storage unavailable" in w for w in warnings), warnings
    assert "available again" in log
