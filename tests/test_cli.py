"""The ``cebroker`` command (issue 2, "CLI") as a real process: help, a bad ``CEBROKER_*`` variable
refused before starting, and ``cebroker serve`` keeping its subscriptions across a restart. The
settings themselves (flags, variables, checks) are tested in test_serve_settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.broker import BrokerProcess, BrokerProcesses


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


def test_version_is_the_one_of_the_version_file() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    version = (Path(__file__).resolve().parents[1] / "VERSION").read_text(encoding="utf-8").strip()
    assert result.stdout.strip() == f"cebroker {version}"


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


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"type": "object",', "not JSON: "),
        (b"\xff\xfe{}", "not JSON: "),
        (b'{"type": 12}', "not a JSON Schema: "),
        (b"[1, 2]", "not a JSON Schema: "),
    ],
    ids=["truncated", "not-utf-8", "bad-keyword", "not-an-object"],
)
def test_an_unusable_registry_document_schema_is_refused(
    tmp_path: Path, broker_processes: BrokerProcesses, content: bytes, reason: str
) -> None:
    """A schema file that is there but cannot be used stops ``cebroker serve`` at start: exit 2
    and one line naming the flag, the file and why, with no traceback."""
    schema = tmp_path / "schema.json"
    schema.write_bytes(content)
    broker = broker_processes(tmp_path / "b.db", "broker.log", "--registry-document-schema", str(schema))
    assert broker.start().exit_code(timeout=60) == 2, broker.log_text()
    log = broker.log_text()
    assert "Traceback" not in log, log
    [line] = [line for line in log.splitlines() if "registry-document-schema" in line]
    assert line.startswith(f"cebroker serve: --registry-document-schema {schema}: {reason}"), log


@pytest.fixture
def broker(tmp_path: Path, broker_processes: BrokerProcesses) -> BrokerProcess:
    """``cebroker serve`` on the host given by a flag and the port by its variable, logging at
    debug level (not yet started)."""
    db = tmp_path / "data" / "broker.db"
    flags = ("--host", "127.0.0.1", "--log-level", "debug")
    return broker_processes(db, "broker.log", *flags, port_variable=True)


def stop(broker: BrokerProcess) -> None:
    """SIGTERM, then expect a graceful shutdown (uvicorn re-raises the signal once it is done)."""
    shutdowns = broker.log_text().count("Application shutdown complete")
    code = broker.terminate()
    assert code in (0, -signal.SIGTERM), code
    assert broker.log_text().count("Application shutdown complete") == shutdowns + 1


def test_serve_over_tcp_survives_restart(broker: BrokerProcess) -> None:
    """A real ``cebroker serve``: the database file is created on first start, subscriptions
    are served over TCP, and after a restart they are all there with the same ETags."""
    broker.start().ready()
    assert Path(broker.db).exists()
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
    stop(broker)

    broker.start().ready()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        listed = http.get("/subscriptions").json()
        assert listed == [doc for doc, _ in created]
        for doc, etag in created:
            r = http.get(f"/subscriptions/{doc['id']}")
            assert r.status_code == 200
            assert r.headers["etag"] == etag
        assert http.get(f"/subscriptions/{gone}").status_code == 404
        assert http.get("/subscriptions", params={"type": "t2"}).json() == [created[1][0]]
    stop(broker)
    log = broker.log_text()
    assert "created (protocol HTTP)" in log  # the debug log did record the writes...
    assert "restart-secret" not in log  # ...but never the credential's secret


def test_created_subscription_survives_sigkill(broker: BrokerProcess) -> None:
    """A 201 means committed: after SIGKILL (no shutdown at all) the subscription is there."""
    broker.start().ready()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        r = http.post(
            "/subscriptions",
            json={"protocol": "NATS", "sink": "nats://n:4222", "protocolsettings": {"subject": "a.b"}},
        )
        assert r.status_code == 201
        created = r.json()
    broker.kill()
    broker.start().ready()
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        assert http.get(f"/subscriptions/{created['id']}").json() == created
    stop(broker)
