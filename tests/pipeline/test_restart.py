"""A clean restart keeps every pending retry, dead letter and count (the log is the state;
issue "Matching and dispatch": deliveries are durable entries)."""

from __future__ import annotations

from pathlib import Path

import httpx
from support.events import event
from support.servers import ServerThread
from support.sinks import Reply, Sink
from support.waiting import wait_for, wait_until

from cebroker.app import create_app
from cebroker.settings import Settings


def test_pending_retries_and_dead_letters_survive_a_restart(tmp_path: Path, sink: Sink) -> None:
    settings = Settings(db=tmp_path / "b.db", webhook_validation=False)
    sink.default["/later"] = Reply(503)
    sink.default["/never"] = Reply(422)
    with ServerThread(create_app(settings)) as first, httpx.Client(base_url=first.url) as client:
        later = client.post(
            "/subscriptions",
            json={"protocol": "HTTP", "sink": f"{sink.url}/later", "config": {"initialdelay": "1"}},
        ).json()
        never = client.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/never"}).json()
        for i in range(3):
            assert (
                client.post(
                    "/events", json=event(i), headers={"content-type": "application/cloudevents+json"}
                ).status_code
                == 202
            )
        wait_until(lambda: client.get(f"/subscriptions/{never['id']}/status").json()["deadlettered"] == 3)
        wait_until(lambda: client.get(f"/subscriptions/{later['id']}/status").json()["failed"] >= 3)
    sink.default["/later"] = Reply(200)
    before = len(sink.at("/later"))
    with ServerThread(create_app(settings)) as second, httpx.Client(base_url=second.url) as client:
        wait_until(lambda: {r.headers["ce-id"] for r in sink.at("/later")[before:]} == {"e-0", "e-1", "e-2"})
        status = wait_for(
            lambda: client.get(f"/subscriptions/{later['id']}/status").json(),
            lambda status: status["delivered"] == 3,
            message="the three retries delivered after the restart",
        )
        assert status["pending"] == 0
        assert status["failed"] >= 3
        assert len(client.get(f"/subscriptions/{never['id']}/deadletters").json()["items"]) == 3
