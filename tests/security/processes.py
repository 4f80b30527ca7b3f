"""``cebroker`` as a real process for the security tests; each stopped by its own PID only."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cebroker ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "cebroker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


class Served:
    """``cebroker serve --db DB ARGS`` on a free loopback port."""

    def __init__(self, db: Path, log: Path, *args: str, scheme: str = "http") -> None:
        self.db = db
        self.log = log
        self.args = args
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, verify: ssl.SSLContext | bool = True) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cebroker",
                    "serve",
                    "--db",
                    str(self.db),
                    "--port",
                    str(self.port),
                    *self.args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited early:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1, verify=verify).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"broker not ready in 30 s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
