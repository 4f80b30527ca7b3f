"""At-least-once across SIGKILL (issue "Matching and dispatch"; architecture invariant
"accepted means durable"): a ``cebroker serve`` process is killed while events stream in,
restarted on the same database, and every event that got a 202 reaches the sink."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pipeline.helpers import event
from pipeline.servers import Reply, ServerThread, Sink, wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``python -m cebroker serve`` as a child process."""

    def __init__(self, db: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = ["serve", "--port", str(self.port), "--db", str(db), "--webhook-validation", "off"]
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cebroker", *args, "--log-level", "warning"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"broker did not start; see {log}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self._log.close()


@pytest.fixture
def sink() -> Iterator[tuple[Sink, str]]:
    recorder = Sink()
    with ServerThread(recorder) as server:
        yield recorder, server.url


@pytest.mark.slow
def test_sigkill_while_streaming_loses_no_accepted_event(tmp_path: Path, sink: tuple[Sink, str]) -> None:
    """Kill -9 mid-stream, restart: every 202-acknowledged event is delivered (duplicates allowed)."""
    recorder, url = sink
    # A slow sink keeps deliveries pending, so the kill lands with a real backlog.
    recorder.default["/crash"] = Reply(200, delay=0.02)
    db = tmp_path / "broker.db"
    first = BrokerProcess(db, tmp_path / "broker.log")
    body = {"protocol": "HTTP", "sink": f"{url}/crash", "config": {"concurrency": "2"}}
    assert httpx.post(f"{first.url}/subscriptions", json=body).status_code == 201

    accepted: list[str] = []
    stop = threading.Event()

    def produce(worker: int) -> None:
        with httpx.Client(base_url=first.url, timeout=5) as client:
            n = 0
            while not stop.is_set():
                n += 1
                batch = [event(worker * 1_000_000 + n * 10 + k) for k in range(5)]
                try:
                    r = client.post(
                        "/events",
                        content=json.dumps(batch),
                        headers={"content-type": "application/cloudevents-batch+json"},
                    )
                except httpx.HTTPError:
                    return  # the broker died; this request was not acknowledged
                if r.status_code == 202:
                    accepted.extend(e["id"] for e in batch)

    producers = [threading.Thread(target=produce, args=(w,)) for w in range(3)]
    for p in producers:
        p.start()
    wait_until(lambda: len(accepted) > 300 and len(recorder.at("/crash")) > 20, timeout=30)
    first.kill()
    stop.set()
    for p in producers:
        p.join()
    delivered_before = {r.headers["ce-id"] for r in recorder.at("/crash")}
    assert set(accepted) - delivered_before, "the kill should leave accepted events undelivered"

    recorder.default.pop("/crash")
    second = BrokerProcess(db, tmp_path / "broker.log")
    try:
        wait_until(lambda: set(accepted) <= {r.headers["ce-id"] for r in recorder.at("/crash")}, timeout=90)
    finally:
        second.terminate()
