"""Helpers shared by the pipeline tests: a handle on a running broker and a sample event."""

from __future__ import annotations

from typing import Any

import httpx

from pipeline.servers import ServerThread, wait_until


class Broker:
    """A running broker with an HTTP client bound to it."""

    def __init__(self, server: ServerThread, client: httpx.Client, app: Any) -> None:
        self.server = server
        self.url = server.url
        self.http = client
        self.app = app

    def subscribe(self, sink: str, **fields: Any) -> dict[str, Any]:
        body = {"protocol": "HTTP", "sink": sink, **fields}
        response = self.http.post("/subscriptions", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def send(self, event: dict[str, Any]) -> httpx.Response:
        return self.http.post("/events", json=event, headers={"content-type": "application/cloudevents+json"})

    def status(self, subscription: dict[str, Any]) -> dict[str, Any]:
        """The delivery status of ``subscription`` (as returned by :meth:`subscribe`)."""
        return dict(self.http.get(f"/subscriptions/{subscription['id']}/status").json())

    def settled(self) -> None:
        """Wait until no delivery is pending: each one accepted so far has reached its sink (or
        its dead letter, or was dropped with its subscription), so none can arrive later."""
        wait_until(lambda: "cebroker_delivery_backlog 0.0" in self.http.get("/metrics").text)


def event(n: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid structured event."""
    return {
        "specversion": "1.0",
        "id": f"e-{n}",
        "source": "/tests",
        "type": "com.example.test",
        "datacontenttype": "application/json",
        "data": {"n": n},
        **extra,
    }
