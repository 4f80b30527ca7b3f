"""``cebroker receive`` against a real broker: prints the events of a PULL subscription under
their locks, and acknowledges them only with ``--ack``."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from client.conftest import Ran

Cli = Callable[..., Ran]
BATCH = {"content-type": "application/cloudevents-batch+json"}


def test_receive_prints_and_acknowledges_on_request(cli: Cli, broker_url: str) -> None:
    sid = httpx.post(f"{broker_url}/subscriptions", json={"protocol": "PULL"}).json()["id"]
    events = [
        {"specversion": "1.0", "id": f"r-{n}", "source": "/cli", "type": "com.example.r"} for n in range(3)
    ]
    assert httpx.post(f"{broker_url}/events", json=events, headers=BATCH).status_code == 202

    shown = cli("receive", sid, "--max", "2")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0].split()[:4] == ["ID", "TYPE", "SOURCE", "DELIVERIES"]
    assert [line.split()[0] for line in lines[1:]] == ["r-0", "r-1"]

    taken = cli("receive", sid, "--max", "10", "--json", "--ack")
    assert taken.code == 0, taken.err
    got = [json.loads(line) for line in taken.out.splitlines()]
    assert [g["event"]["id"] for g in got] == ["r-2"]  # the first two are still locked
    assert got[0]["deliverycount"] == 1
    status = httpx.get(f"{broker_url}/subscriptions/{sid}/status").json()
    assert (status["delivered"], status["pending"]) == (1, 2)

    push = httpx.post(
        f"{broker_url}/subscriptions", json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/x"}
    )
    refused = cli("receive", push.json()["id"])
    assert refused.code == 1
    assert "only PULL ones are received" in refused.err
