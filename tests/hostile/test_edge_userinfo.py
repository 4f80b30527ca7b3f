"""No secrets in URLs (issue: hardening, finding 6): user information (a token as the user name,
or a password) in a sink of any protocol, a dead-letter sink or a token endpoint is refused
with a 400 naming the field and pointing at ``sinkcredential``, and nothing is stored; a
subscription stored with one by an earlier release is reported at start (without the secret)
and shown with ``***`` in every view. Real ``cebroker serve`` processes; the earlier release's
row is written into the database directly."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostile.support import HostileBroker, snapshot, start_broker

TOKEN = "tok-9f8e7d6c5b4a"
CREDENTIAL = {
    "credentialtype": "REFRESHTOKEN",
    "accesstoken": "a",
    "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
    "accesstokentype": "Bearer",
    "refreshtoken": "r",
}
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"protocol": "HTTP", "sink": f"http://{TOKEN}@127.0.0.1:9/x"}, "/sink"),
    ({"protocol": "HTTP", "sink": f"https://user:{TOKEN}@127.0.0.1:9/x"}, "/sink"),
    ({"protocol": "MQTT3", "sink": f"mqtt://{TOKEN}@127.0.0.1:1883/t"}, "/sink"),
    ({"protocol": "NATS", "sink": f"nats://{TOKEN}@127.0.0.1:4222/s"}, "/sink"),
    (
        {
            "protocol": "HTTP",
            "sink": "http://127.0.0.1:9/x",
            "config": {"deadlettersink": f"http://{TOKEN}@127.0.0.1:9/dead"},
        },
        "/config/deadlettersink",
    ),
    (
        {
            "protocol": "HTTP",
            "sink": "http://127.0.0.1:9/x",
            "sinkcredential": {**CREDENTIAL, "refreshtokenendpoint": f"http://{TOKEN}@127.0.0.1:9/t"},
        },
        "/sinkcredential/refreshtokenendpoint",
    ),
]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[HostileBroker]:
    process = start_broker(tmp_path / "userinfo.db", tmp_path / "broker.log")
    try:
        yield process
    finally:
        process.close()


@pytest.mark.parametrize(("body", "pointer"), REFUSED, ids=[pointer for _, pointer in REFUSED])
def test_user_information_in_a_url_is_refused(
    broker: HostileBroker, tmp_path: Path, body: dict[str, Any], pointer: str
) -> None:
    before = snapshot(tmp_path / "userinfo.db")
    answer = httpx.post(f"{broker.url}/subscriptions", json=body, timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    named = [item for item in problem["errors"] if item.get("pointer") == pointer]
    assert named, problem
    assert "sinkcredential" in named[0]["detail"]
    assert TOKEN not in answer.text
    assert snapshot(tmp_path / "userinfo.db") == before


def test_a_stored_url_with_user_information_is_reported_and_never_shown(
    broker: HostileBroker, tmp_path: Path
) -> None:
    db = tmp_path / "userinfo.db"
    created = httpx.post(
        f"{broker.url}/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": "http://127.0.0.1:9/x",
            "config": {"deadlettersink": "http://127.0.0.1:9/dead"},
        },
        timeout=10,
    )
    assert created.status_code == 201, created.text
    sub_id = created.json()["id"]
    broker.terminate()
    # What an earlier release stored: the URLs with the token in their user information.
    sink, dead = f"http://{TOKEN}@127.0.0.1:9/x", f"http://{TOKEN}@127.0.0.1:9/dead"
    conn = sqlite3.connect(db)
    try:
        (doc_text,) = conn.execute("SELECT doc FROM subscriptions WHERE id = ?", (sub_id,)).fetchone()
        doc = json.loads(doc_text)
        doc["sink"] = sink
        doc["config"]["deadlettersink"] = dead
        with conn:
            conn.execute(
                "UPDATE subscriptions SET sink = ?, doc = ? WHERE id = ?", (sink, json.dumps(doc), sub_id)
            )
    finally:
        conn.close()
    broker.start().ready()
    report = [line for line in broker.log_lines() if sub_id in line and "user information" in line]
    assert report, broker.log_text()
    assert "/sink" in report[0]
    assert "/config/deadlettersink" in report[0]
    shown = [
        httpx.get(f"{broker.url}{path}", timeout=10).text
        for path in (
            "/subscriptions",
            f"/subscriptions/{sub_id}",
            f"/subscriptions/{sub_id}/status",
            "/status/subscriptions",
            "/metrics",
        )
    ]
    one = json.loads(shown[1])
    assert one["sink"] == "http://***@127.0.0.1:9/x"
    assert one["config"]["deadlettersink"] == "http://***@127.0.0.1:9/dead"
    assert [text for text in shown if TOKEN in text] == []
    assert TOKEN not in broker.log_text()
