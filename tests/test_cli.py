"""The ``cebroker`` command (issue 2, "CLI") as a real process: help, a bad ``CEBROKER_*`` variable
refused before starting, and ``cebroker serve`` keeping its subscriptions across a restart. The
settings themselves (flags, variables, checks) are tested in test_serve_settings."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cebroker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_help_lists_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "serve" in result.stdout


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CEBROKER_WEBHOOK_VALIDATION", "maybe"),
        ("CEBROKER_MAX_BACKLOG", "lots"),
        ("CEBROKER_DEDUP_WINDOW", "-1"),
        ("CEBROKER_PORT", "70000"),
    ],
)
def test_bad_variable_is_a_usage_error(variable: str, value: str) -> None:
    """The real command refuses a bad variable before starting anything: exit 2, naming the
    variable and the value (each setting and bad value is tested in process in test_serve_settings)."""
    result = run_cli("serve", env={variable: value})
    assert result.returncode == 2
    assert f"cebroker serve: error: environment variable {variable}: invalid value {value!r}" in result.stderr
    assert "Traceback" not in result.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Broker:
    """``cebroker serve`` as a child process on a free port; stopped by its own PID only."""

    def __init__(self, db: Path, log: Path) -> None:
        self.db = db
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "CEBROKER_PORT": str(self.port)}  # the port through the variable
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cebroker",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--db",
                    str(self.db),
                    "--log-level",
                    "debug",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
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
        """SIGTERM, then expect a graceful shutdown (uvicorn re-raises the signal once it is done)."""
        assert self.proc is not None
        shutdowns = self.log.read_text().count("Application shutdown complete")
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise
        finally:
            self.proc = None
        assert code in (0, -signal.SIGTERM), code
        assert self.log.read_text().count("Application shutdown complete") == shutdowns + 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data" / "broker.db", tmp_path / "broker.log")
    yield b
    if b.proc is not None and b.proc.poll() is None:
        b.proc.kill()
        b.proc.wait(timeout=10)


def test_serve_over_tcp_survives_restart(broker: Broker) -> None:
    """A real ``cebroker serve``: the database file is created on first start, subscriptions
    are served over TCP, and after a restart they are all there with the same ETags."""
    broker.start()
    assert broker.db.exists()
    created = []
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        for i in range(3):
            body = {
                "protocol": "HTTP",
                "sink": f"https://sink.example/{i}",
                "types": [f"t{i}"],
                "sinkcredential": {"credentialtype": "PLAIN", "identifier": "u", "secret": "restart-secret"},
            }
            r = http.post("/subscriptions", json=body)
            assert r.status_code == 201, r.text
            created.append((r.json(), r.headers["etag"]))
        gone = created.pop(1)[0]["id"]
        assert http.delete(f"/subscriptions/{gone}").status_code == 200
    broker.stop()

    broker.start()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        listed = http.get("/subscriptions").json()
        assert listed == [doc for doc, _ in created]
        for doc, etag in created:
            r = http.get(f"/subscriptions/{doc['id']}")
            assert r.status_code == 200
            assert r.headers["etag"] == etag
        assert http.get(f"/subscriptions/{gone}").status_code == 404
        assert http.get("/subscriptions", params={"type": "t2"}).json() == [created[1][0]]
    broker.stop()
    log = broker.log.read_text()
    assert "created (protocol HTTP)" in log  # the debug log did record the writes...
    assert "restart-secret" not in log  # ...but never the credential's secret


def test_created_subscription_survives_sigkill(broker: Broker) -> None:
    """A 201 means committed: after SIGKILL (no shutdown at all) the subscription is there."""
    broker.start()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        r = http.post(
            "/subscriptions",
            json={"protocol": "NATS", "sink": "nats://n:4222", "protocolsettings": {"subject": "a.b"}},
        )
        assert r.status_code == 201
        created = r.json()
    assert broker.proc is not None
    broker.proc.kill()
    broker.proc.wait(timeout=10)
    broker.proc = None
    broker.start()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        assert http.get(f"/subscriptions/{created['id']}").json() == created
    broker.stop()
