"""What the hostile-input tests add to the shared helpers: a ``cebroker serve`` process whose
log and metrics they read, the raw-socket requests no HTTP client library would send, and a
snapshot of everything stored."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from support.broker import BrokerProcess

#: Nested far beyond every limit (and beyond Python's recursion limit).
BOMB = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
#: The largest body any route accepts (a batch or a registry import), plus one byte.
OVERSIZED = 16 * 1024 * 1024 + 1


class HostileBroker(BrokerProcess):
    """``cebroker serve`` on a free port, logging at info level (see :func:`start_broker`)."""

    def log_lines(self) -> list[str]:
        """Every line the broker has logged so far."""
        return self.log_text().splitlines()

    def metric(self, name: str, **labels: str) -> float:
        """The current value of one sample from ``/metrics`` (0 when absent)."""
        wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
        for line in httpx.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            sample, _, value = line.rpartition(" ")
            if sample == wanted:
                return float(value)
        return 0.0


def start_broker(db: Path, log: Path) -> HostileBroker:
    """A ready broker over ``db``, its log (info level) in ``log``, without the webhook handshake."""
    broker = HostileBroker(db, log, "--webhook-validation", "off", "--log-level", "info")
    broker.start()
    broker.ready()
    return broker


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
