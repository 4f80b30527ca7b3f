"""Storage failures are the client's 503, never a 500 (issue: "Storage failures are the
client's 503"). Each cause is injected into the real SQLite backend of a whole broker served
on 127.0.0.1: writes answer 503 with ``Retry-After`` and the cause, nothing is half-written,
``readyz`` says why it is not ready, the episode is logged once without a traceback, and the
broker recovers by itself (its probe) once the storage works again."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.broker import Broker
from support.events import event
from support.sinks import Sink
from support.waiting import wait_for, wait_until

from cebroker.storage.sqlite import SqliteStorage
from storage.faults import CAUSES, Faults, faulty_connection

BATCH = {"content-type": "application/cloudevents-batch+json"}


class Served:
    """A whole broker over a SQLite backend whose statements fail on demand."""

    def __init__(self, http: httpx.Client, faults: Faults) -> None:
        self.http = http
        self.faults = faults


@pytest.fixture
def broker(tmp_path: Path, make_broker: Callable[..., Broker]) -> Iterator[Served]:
    db = tmp_path / "broker.db"
    connection, faults = faulty_connection()
    served = make_broker(db=db, storage=SqliteStorage(db, connection_factory=connection))
    with httpx.Client(base_url=served.url, timeout=10) as http:
        yield Served(http, faults)


def storage_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("cebroker")]


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_a_failing_commit_is_503_with_the_cause_until_it_recovers(
    broker: Served, sink: Sink, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cebroker")
    http = broker.http
    sub = http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/hook"}).json()
    broker.faults.arm(cause, sql="COMMIT", thread="writer")
    retry = "1" if cause == "database locked" else "5"

    r = http.post("/events", json=[event(1), event(2)], headers=BATCH)
    assert (r.status_code, r.headers["retry-after"]) == (503, retry)
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == "https://cebroker.dev/problems/store-unavailable"
    assert cause in r.json()["detail"]
    r = http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/other"})
    assert (r.status_code, r.headers["retry-after"], r.json()["status"]) == (503, retry, 503)
    r = http.put("/messagegroups/g", json={"description": "x"})
    assert (r.status_code, r.headers["retry-after"]) == (503, retry)
    assert r.json()["type"].endswith("#server_busy")
    assert cause in r.json()["detail"]
    ready = http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["detail"] == f"storage unavailable: {cause}"
    # reads still work, and show that nothing of the refused writes was stored
    assert [s["id"] for s in http.get("/subscriptions").json()] == [sub["id"]]
    assert http.get("/messagegroups/g").status_code == 404
    assert http.get(f"/subscriptions/{sub['id']}/status").json()["pending"] == 0

    broker.faults.disarm()
    # the probe notices, no traffic needed
    wait_until(lambda: http.get("/readyz").status_code == 200, message="readyz ready again")
    assert http.post("/events", json=[event(1), event(2)], headers=BATCH).status_code == 202
    assert {r.headers["ce-id"] for r in sink.wait("/hook", 2)} == {"e-1", "e-2"}
    records = storage_records(caplog)
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # once per episode
    assert cause in warnings[0].getMessage()
    assert any("available again" in r.getMessage() for r in records if r.levelno == logging.INFO)
    assert not [r for r in records if r.levelno >= logging.ERROR or r.exc_info]


def test_failing_bookkeeping_neither_spins_nor_loses_deliveries(
    broker: Served, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    """The dispatcher's own writes (a confirmed delivery's removal) failing: it retries them at
    a steady pace and, once the storage works again, every delivery is recorded as delivered."""
    caplog.set_level(logging.INFO, logger="cebroker")
    http = broker.http
    sub = http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/hook"}).json()
    broker.faults.arm("disk full", sql="DELETE FROM pipeline_deliveries", thread="writer")
    armed = time.monotonic()
    assert http.post("/events", json=[event(n) for n in range(5)], headers=BATCH).status_code == 202
    sink.wait("/hook", 5)
    wait_until(lambda: broker.faults.hits >= 3)
    rate = broker.faults.hits / (time.monotonic() - armed)
    assert rate < 5, f"{broker.faults.hits} attempts in {time.monotonic() - armed:.1f} s"
    assert http.get(f"/subscriptions/{sub['id']}/status").json()["delivered"] == 0
    broker.faults.disarm()
    status = wait_for(
        lambda: http.get(f"/subscriptions/{sub['id']}/status").json(),
        lambda status: status["delivered"] == 5,
        message="the five deliveries recorded",
    )
    assert status["pending"] == 0
    assert {r.headers["ce-id"] for r in sink.at("/hook")} == {f"e-{n}" for n in range(5)}
    assert wait_until(lambda: http.get("/readyz").status_code == 200)
    assert not [r for r in storage_records(caplog) if r.levelno >= logging.ERROR or r.exc_info]


def test_failing_reads_are_503_too(broker: Served) -> None:
    broker.faults.arm("I/O error", sql="SELECT", thread="reader")
    for path in ("/subscriptions", "/subscriptions/x", "/messagegroups"):
        r = broker.http.get(path)
        assert r.status_code == 503, path
        assert "I/O error" in r.json()["detail"]
