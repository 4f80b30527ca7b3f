"""The user information of a sink URL (a token given as the user name, or a password, in a
subscription stored before the API refused them) never shows in what the broker records
about failed deliveries (the dead letters, the delivery status and the log), nor in the
subscription itself, its listing or the status overview.

The sinks are real: one that answers 500 and a port on 127.0.0.1 that refuses connections, each
reached by the delivery itself, and by the webhook validation handshake before it."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servers import CLOSED_PORT
from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_for

from cebroker.api.admission import realize
from cebroker.app import admission_rules, storage_from_settings
from cebroker.settings import Settings

SECRET = "s3cr3t-Tok3n"
CONFIG = {"initialdelay": "0.05", "maxdelay": "0.1", "maxattempts": "2"}
#: The test's event only (the registry announces its own changes as events too).
TYPES = ["com.example.test"]


def seed(db: Path, sinks: dict[str, str]) -> None:
    """Store an HTTP subscription to each sink (id -> URL) as an earlier release could have: a
    password in the URL is not refused here."""

    async def write() -> None:
        storage = storage_from_settings(Settings(db=db))
        await storage.open()
        try:
            for sub_id, url in sinks.items():
                body = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/", "types": TYPES, "config": CONFIG}
                sub = realize(body, rules=admission_rules(), subscription_id=sub_id)
                await storage.subscriptions.create(dataclasses.replace(sub, sink=url))
        finally:
            await storage.close()

    asyncio.run(write())


@pytest.mark.parametrize("handshake", [False, True], ids=["delivery", "handshake"])
def test_sink_userinfo_stays_out_of_dead_letters_status_and_log(
    tmp_path: Path,
    make_broker: Callable[..., Broker],
    sink: Sink,
    caplog: pytest.LogCaptureFixture,
    handshake: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    answering = sink.url.removeprefix("http://")
    refusing = f"127.0.0.1:{CLOSED_PORT}"
    sink.default["/fails"] = Reply(500, body=b"down")
    db = tmp_path / "userinfo.db"
    seed(
        db,
        {
            "password-500": f"http://user:{SECRET}@{answering}/fails",
            "password-refused": f"http://user:{SECRET}@{refusing}/x",
            # A token as the user name: the API refuses it now, an earlier release took it.
            "token-500": f"http://{SECRET}@{answering}/fails",
            "token-refused": f"http://{SECRET}@{refusing}/x",
        },
    )
    broker = make_broker(db=db, webhook_validation=handshake)
    ids = ["password-500", "password-refused", "token-500", "token-refused"]
    assert broker.send(event(1)).status_code == 202

    def dead_letters(sub_id: str) -> list[dict[str, Any]]:
        return list(broker.http.get(f"/subscriptions/{sub_id}/deadletters").json()["items"])

    recorded: dict[str, str] = {}
    for sub_id in ids:
        dead = wait_for(
            functools.partial(dead_letters, sub_id),
            lambda items: len(items) == 1,
            message=f"the dead letter of {sub_id}",
        )
        assert dead[0]["attempts"] == 2
        assert "gave up after 2 attempts" in dead[0]["lastError"]
        status = broker.http.get(f"/subscriptions/{sub_id}/status").json()
        assert status["deadlettered"] == 1
        recorded[sub_id] = json.dumps(dead) + json.dumps(status)
    assert "sink answered 500" in recorded["password-500"]  # what failed is still said...
    assert "cannot reach http://***@127.0.0.1:" in recorded["password-refused"]  # ...and where
    texts = list(recorded.values())
    overview = broker.http.get("/status/subscriptions").json()["items"]
    texts += [json.dumps(item) for item in overview]
    texts.append(broker.http.get("/subscriptions").text)
    texts += [broker.http.get(f"/subscriptions/{sub_id}").text for sub_id in ids]
    texts += [record.getMessage() for record in caplog.records]
    texts.append(caplog.text)  # tracebacks included
    leaks = [text[max(0, at - 100) : at + 40] for text in texts if (at := text.find(SECRET)) >= 0]
    assert leaks == []
