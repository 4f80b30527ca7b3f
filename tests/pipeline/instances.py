"""Broker instances as child processes on one PostgreSQL database, for the multi-instance tests
and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Instance:
    """``python -m cebroker serve --db URL`` as a child process, ready when constructed."""

    def __init__(self, db: str, log: Path, *extra: str, lease: str = "2s") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = ["serve", "--port", str(self.port), "--db", db, "--webhook-validation", "off"]
        args += ["--instance-lease", lease, "--log-level", "warning", *extra]
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cebroker", *args], stdout=self._log, stderr=subprocess.STDOUT
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
        """SIGKILL: no chance to give anything back."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
