"""A circuit shared by two ``cebroker serve`` instances on one PostgreSQL database: both stop
sending the backlog to a sink that is down, the probes go one at a time for both, no delivery
row is rewritten while they wait but the probes', and the backlog flows once the sink is back."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest
from support.broker import BrokerProcess, BrokerProcesses
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_until

# alone: the probes go on while the test reads the rows and the probe count, which its bound of
# one probe's slack assumes are read close together.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.alone]

BATCH = {"content-type": "application/cloudevents-batch+json"}


@pytest.fixture
def start(broker_processes: BrokerProcesses) -> Callable[..., BrokerProcess]:
    logs = itertools.count()

    def launch(db: str) -> BrokerProcess:
        flags = ("--webhook-validation", "off", "--instance-lease", "2s", "--log-level", "warning")
        return broker_processes(db, f"broker-{next(logs)}.log", *flags).start().ready()

    return launch


def rows(url: str) -> dict[int, str]:
    """Each delivery row's id and the transaction that last wrote it (``xmin``)."""
    with psycopg.connect(url) as conn:
        return {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, xmin FROM pipeline_deliveries")}


def test_two_instances_share_the_circuit_and_rewrite_no_waiting_row(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    sink.default["/down"] = Reply(503)
    created = httpx.post(
        f"{a.url}/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/down", "config": {"probemaxdelay": "0.5"}},
    )
    assert created.status_code == 201
    status = f"/subscriptions/{created.json()['id']}/status"
    for first, instance in zip(range(0, 2000, 500), itertools.cycle((a, b)), strict=False):
        batch = [event(n) for n in range(first, first + 500)]
        posted = httpx.post(f"{instance.url}/events", content=json.dumps(batch), headers=BATCH)
        assert posted.status_code == 202

    def circuit(instance: BrokerProcess) -> dict[str, Any]:
        return dict(httpx.get(instance.url + status).json()["circuit"])

    wait_until(lambda: circuit(a)["failedProbes"] >= 3, timeout=30)
    assert circuit(b)["openedAt"] == circuit(a)["openedAt"]  # one circuit for both
    before, attempts, probes = rows(postgres_url), len(sink.at("/down")), circuit(a)["failedProbes"]
    wait_until(lambda: circuit(a)["failedProbes"] >= probes + 6, timeout=30)
    after, made = rows(postgres_url), circuit(a)["failedProbes"] - probes
    rewritten = [n for n, xmin in after.items() if before.get(n) != xmin]
    assert len(after) == 2000
    # One row per probe (its attempt recorded), never the waiting backlog; one request per probe.
    assert len(rewritten) <= made + 1
    assert len(sink.at("/down")) - attempts <= made + 1
    switched = len(sink.at("/down"))
    sink.default["/down"] = Reply(200)
    wait_until(lambda: httpx.get(a.url + status).json()["delivered"] == 2000, timeout=60)
    assert {r.headers["ce-id"] for r in sink.at("/down")[switched:]} == {f"e-{n}" for n in range(2000)}
    wait_until(lambda: circuit(a)["state"] == "closed" and circuit(b)["state"] == "closed", timeout=30)
