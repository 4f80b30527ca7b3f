"""A real ``cebroker serve`` process for the hostile-input tests, with its log in a file, plus
the raw-socket requests no HTTP client library would send and a snapshot of everything stored."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from servers.base import free_port

#: Nested far beyond every limit (and beyond Python's recursion limit).
BOMB = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
#: The largest body any route accepts (a batch or a registry import), plus one byte.
OVERSIZED = 16 * 1024 * 1024 + 1


class BrokerProcess:
    """``python -m cebroker serve`` on a free port, logging at info level into ``log``."""

    def __init__(self, db: Path, log: Path, *args: str) -> None:
        self.db = db
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "cebroker", "serve", "--port", str(self.port), "--db", str(db)]
        command += ["--webhook-validation", "off", "--log-level", "info", *args]
        self._log = log.open("ab")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the broker did not start; see {log}")

    def log_lines(self) -> list[str]:
        """Every line the broker has logged so far."""
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()

    def metric(self, name: str, **labels: str) -> float:
        """The current value of one sample from ``/metrics`` (0 when absent)."""
        wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
        for line in httpx.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            sample, _, value = line.rpartition(" ")
            if sample == wanted:
                return float(value)
        return 0.0

    def stop(self) -> None:
        """Terminate the process (by its PID) and wait for it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the broker's database, in a comparable form."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
            for table in tables
            if not table.startswith("sqlite_")
        }
    finally:
        conn.close()


def raw_request(port: int, head: str, body: bytes = b"", *, abandon: bool = False) -> int | None:
    """Send ``head`` (request line and headers, without the blank line) and ``body`` over a
    plain socket. Returns the response status, or None when ``abandon`` closes the connection
    right after sending (a client that goes away) or the server answered nothing."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        # The server may answer (e.g. 413) and close before it has read everything.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        if abandon:
            sock.shutdown(socket.SHUT_RDWR)
            return None
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    if not data.startswith(b"HTTP/1.1 "):
        return None
    return int(data[9:12])


def headers_text(method: str, path: str, headers: Sequence[tuple[str, str]]) -> str:
    """A request line and header block for :func:`raw_request`."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers)]
    return "\r\n".join(lines)
