"""``cebroker serve`` as a real process: ``--log-format json`` writes one JSON object per line,
uvicorn's lines included; ``--access-log on`` adds a line per request with its fields; the
server runs on uvloop and httptools when they are installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from test_cli import free_port


def _serve(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with (tmp_path / "out.log").open("wb") as out, (tmp_path / "err.log").open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cebroker",
                "serve",
                "--port",
                str(port),
                "--db",
                str(tmp_path / "b.db"),
                *flags,
            ],
            stdout=out,
            stderr=err,
            env={k: v for k, v in os.environ.items() if not k.startswith("CEBROKER_")},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / "err.log").read_text()
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("broker not ready in 30 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_json_logs_and_access_log(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path, "--log-format", "json", "--access-log", "on", "--log-level", "debug")
    try:
        secret = {"credentialtype": "PLAIN", "identifier": "u", "secret": "json-log-secret"}
        body = {"protocol": "HTTP", "sink": "https://s.example/x", "sinkcredential": secret}
        assert httpx.post(f"{url}/subscriptions", json=body).status_code == 201
        assert httpx.get(f"{url}/subscriptions/nope").status_code == 404
    finally:
        _stop(proc)
    errors = [json.loads(line) for line in _lines(tmp_path / "err.log")]
    assert errors, "no log lines"
    for record in errors:
        assert {"time", "level", "logger", "message"} <= set(record)
    messages = [r["message"] for r in errors]
    assert any("created (protocol HTTP)" in m for m in messages)  # the broker's own logger
    assert any(r["logger"].startswith("uvicorn") for r in errors)  # uvicorn's, in the same format
    access = [json.loads(line) for line in _lines(tmp_path / "out.log")]
    assert [(a["method"], a["path"], a["status"]) for a in access if a["path"] != "/readyz"] == [
        ("POST", "/subscriptions", 201),
        ("GET", "/subscriptions/nope", 404),
    ]
    everything = (tmp_path / "err.log").read_text() + (tmp_path / "out.log").read_text()
    assert "json-log-secret" not in everything


def test_text_logs_without_access_log_by_default(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path)
    try:
        assert httpx.get(f"{url}/subscriptions").status_code == 200
    finally:
        _stop(proc)
    assert _lines(tmp_path / "out.log") == []  # no access lines
    lines = _lines(tmp_path / "err.log")
    assert lines
    assert all(not line.startswith("{") for line in lines)
    assert any(" INFO uvicorn.error: Application startup complete" in line for line in lines)


def test_standard_extras_by_default_and_on_request(tmp_path: Path) -> None:
    """uvicorn[standard] is a dependency, so auto serves with uvloop and httptools; the plain
    asyncio loop and h11 parser stay available by name."""
    proc, _ = _serve(tmp_path)
    _stop(proc)
    assert "with event loop uvloop and HTTP parser httptools" in (tmp_path / "err.log").read_text()
    proc, url = _serve(tmp_path, "--loop", "asyncio", "--http", "h11")
    try:
        assert httpx.get(f"{url}/healthz").status_code == 200
    finally:
        _stop(proc)
    assert "with event loop asyncio and HTTP parser h11" in (tmp_path / "err.log").read_text()
