"""``cebroker serve`` as a real process: ``--log-format json`` writes one JSON object per line,
uvicorn's lines included; ``--access-log on`` adds a line per request with its fields; the
server runs on uvloop and httptools when they are installed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from support.broker import BrokerProcess, BrokerProcesses


def _serve(broker_processes: BrokerProcesses, tmp_path: Path, *flags: str) -> BrokerProcess:
    """A ready broker whose standard output goes to out.log and standard error to err.log."""
    return broker_processes(tmp_path / "b.db", "err.log", *flags, stdout="out.log").start().ready()


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_json_logs_and_access_log(tmp_path: Path, broker_processes: BrokerProcesses) -> None:
    broker = _serve(
        broker_processes, tmp_path, "--log-format", "json", "--access-log", "on", "--log-level", "debug"
    )
    secret = {"credentialtype": "PLAIN", "identifier": "u", "secret": "json-log-secret"}
    body = {"protocol": "HTTP", "sink": "https://s.example/x", "sinkcredential": secret}
    assert httpx.post(f"{broker.url}/subscriptions", json=body).status_code == 201
    assert httpx.get(f"{broker.url}/subscriptions/nope").status_code == 404
    broker.terminate()
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


def test_text_logs_without_access_log_by_default(tmp_path: Path, broker_processes: BrokerProcesses) -> None:
    broker = _serve(broker_processes, tmp_path)
    assert httpx.get(f"{broker.url}/subscriptions").status_code == 200
    broker.terminate()
    assert _lines(tmp_path / "out.log") == []  # no access lines
    lines = _lines(tmp_path / "err.log")
    assert lines
    assert all(not line.startswith("{") for line in lines)
    assert any(" INFO uvicorn.error: Application startup complete" in line for line in lines)


def test_standard_extras_by_default_and_on_request(tmp_path: Path, broker_processes: BrokerProcesses) -> None:
    """uvicorn[standard] is a dependency, so auto serves with uvloop and httptools; the plain
    asyncio loop and h11 parser stay available by name."""
    _serve(broker_processes, tmp_path).terminate()
    assert "with event loop uvloop and HTTP parser httptools" in (tmp_path / "err.log").read_text()
    broker = _serve(broker_processes, tmp_path, "--loop", "asyncio", "--http", "h11")
    assert httpx.get(f"{broker.url}/healthz").status_code == 200
    broker.terminate()
    assert "with event loop asyncio and HTTP parser h11" in (tmp_path / "err.log").read_text()
