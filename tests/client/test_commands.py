"""The management commands against a real broker: subscriptions, events, dead letters, exit
statuses and problem details, ``--json`` for scripts and tables for people."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.sinks import Reply, served_sink
from support.waiting import wait_until

from client.conftest import Ran

Cli = Callable[..., Ran]


def _event(n: int, **extra: Any) -> dict[str, Any]:
    return {"specversion": "1.0", "id": f"cli-{n}", "source": "/cli", "type": "com.example.cli", **extra}


def _write(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_create_list_get_delete(cli: Cli, tmp_path: Path) -> None:
    body = _write(tmp_path / "sub.json", {"protocol": "HTTP", "sink": "https://sink.example/a"})
    made = cli("subscriptions", "create", body, "--type", "com.example.cli", "--sql", "n > 1")
    assert made.code == 0, made.err
    sub_id = made.out.strip()
    listed = cli("subscriptions", "list", "--json")
    assert listed.code == 0
    docs = listed.json()
    assert isinstance(docs, list)
    assert [d["id"] for d in docs] == [sub_id]
    assert docs[0]["types"] == ["com.example.cli"]
    assert docs[0]["filters"] == [{"sql": "n > 1"}]
    table = cli("subscriptions", "list")
    header, row = table.out.splitlines()
    assert header.split() == ["ID", "PROTOCOL", "SINK", "SOURCE", "TYPES", "FILTERS"]
    assert row.split()[:3] == [sub_id, "HTTP", "https://sink.example/a"]
    shown = cli("subscriptions", "get", sub_id)
    assert "id:" in shown.out
    assert sub_id in shown.out
    assert "delivered:" in shown.out
    assert cli("subscriptions", "delete", sub_id).out.strip() == f"deleted {sub_id}"
    gone = cli("subscriptions", "get", sub_id)
    assert gone.code == 1
    assert "404 Not Found" in gone.err
    assert "no subscription with id" in gone.err


def test_list_follows_pages_and_filters(cli: Cli) -> None:
    for n in range(5):
        protocol = "HTTP" if n % 2 == 0 else "NATS"
        args = ["--protocol", protocol, "--sink", "https://s.example/x" if n % 2 == 0 else "nats://n:4222"]
        if protocol == "NATS":
            args += ["--setting", "subject=a.b"]
        assert cli("subscriptions", "create", *args).code == 0
    everything = cli("subscriptions", "list", "--json").json()
    assert isinstance(everything, list)
    assert len(everything) == 5
    nats = cli("subscriptions", "list", "--protocol", "NATS", "--json").json()
    assert isinstance(nats, list)
    assert {d["protocol"] for d in nats} == {"NATS"}
    assert len(nats) == 2
    two = cli("subscriptions", "list", "--limit", "2", "--json").json()
    assert two == everything[:2]


def test_invalid_subscription_prints_each_problem(cli: Cli) -> None:
    ran = cli("subscriptions", "create", "--protocol", "MQTT", "--sink", "http://x", "--sql", "a =")
    assert ran.code == 1
    assert ran.out == ""
    lines = ran.err.splitlines()
    assert lines[0] == "POST /subscriptions: 400 Bad Request"
    assert any(line.startswith("  /protocol: 'MQTT' is not a protocol") for line in lines)
    assert any(line.startswith("  /filters/0/sql:") for line in lines)
    assert cli("subscriptions", "list", "--json").json() == []  # a refused call changed nothing


def test_bad_local_input_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"protocol": ')
    ran = cli("subscriptions", "create", str(broken))
    assert ran.code == 2
    assert f"the subscription in {broken} is not JSON" in ran.err
    missing = cli("events", "send", str(tmp_path / "nope.json"))
    assert missing.code == 2
    assert "cannot read the event" in missing.err
    assert cli("subscriptions", "create", "--config", "novalue").code == 2


def test_unreachable_broker(cli: Cli) -> None:
    ran = cli("subscriptions", "list", "--url", "http://127.0.0.1:9")
    assert ran.code == 1
    assert ran.err.startswith("cannot reach the broker at http://127.0.0.1:9")


def test_send_structured_binary_and_batch(cli: Cli, tmp_path: Path) -> None:
    with served_sink() as sink:
        sub = cli("subscriptions", "create", "--protocol", "HTTP", "--sink", f"{sink.url}/in").out.strip()
        assert sub
        one = cli("events", "send", _write(tmp_path / "e1.json", _event(1, data={"n": 1})))
        assert one.code == 0
        assert one.out.strip() == "accepted 1, duplicates 0"
        binary = _write(tmp_path / "e2.json", _event(2, subject="eu/1", data={"n": 2}))
        assert cli("events", "send", binary, "--mode", "binary", "--json").json() == {
            "accepted": 1,
            "duplicates": 0,
        }
        batch = _write(tmp_path / "batch.json", [_event(3), _event(4), _event(1)])
        assert cli("events", "send", batch).out.strip() == "accepted 3, duplicates 1"
        got = sink.wait("/in", 4)
        by_id = {r.headers.get("ce-id"): r for r in got}
        assert set(by_id) == {"cli-1", "cli-2", "cli-3", "cli-4"}
        assert by_id["cli-2"].headers["ce-subject"] == "eu/1"  # went out binary, as it came in
        assert json.loads(by_id["cli-2"].body) == {"n": 2}
        bad = cli("events", "send", _write(tmp_path / "bad.json", _event(5, time="yesterday")))
        assert bad.code == 1
        assert "  /time: must be an RFC 3339 timestamp" in bad.err.splitlines()
        assert cli("events", "send", batch, "--mode", "binary").code == 2


def test_dead_letters_list_and_redrive(cli: Cli, tmp_path: Path) -> None:
    with served_sink() as sink:
        sink.default["/dead"] = Reply(status=400, body=b"no thanks")
        sub = cli("subscriptions", "create", "--protocol", "HTTP", "--sink", f"{sink.url}/dead").out.strip()
        for n in (1, 2):
            assert cli("events", "send", _write(tmp_path / f"e{n}.json", _event(n))).code == 0

        def two_dead_letters() -> list[dict[str, Any]]:
            found = cli("deadletters", "list", sub, "--json").json()
            assert isinstance(found, list)
            return found if len(found) == 2 else []

        items = wait_until(two_dead_letters)
        table = cli("deadletters", "list", sub).out.splitlines()
        assert table[0].split()[:4] == ["ID", "FAILED", "AT", "ATTEMPTS"]
        assert len(table) == 3
        assert "com.example.cli cli-1" in table[1]
        sink.default["/dead"] = Reply(status=200)
        first = items[0]["id"]
        assert cli("deadletters", "redrive", sub, "--id", str(first)).out.strip() == "redriven 1"
        sink.wait("/dead", 3)
        left = cli("deadletters", "list", sub, "--json").json()
        assert isinstance(left, list)
        assert [d["id"] for d in left] == [items[1]["id"]]
        assert cli("deadletters", "redrive", sub, "--json").json() == {"redriven": 1}
        missing = cli("deadletters", "list", "no-such-subscription")
        assert missing.code == 1
        assert "404" in missing.err


def test_token_is_sent_as_bearer(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token goes to the broker as ``Authorization: Bearer``, from the flag or the variable,
    and is never printed (a recording server stands in for a broker that checks it)."""
    with served_sink() as fake:
        fake.default["/subscriptions"] = Reply(
            status=401,
            headers={"content-type": "application/problem+json"},
            body=b'{"title": "Unauthorized", "status": 401, "detail": "bad token"}',
        )
        ran = cli("subscriptions", "list", "--url", fake.url, "--token", "s3cret-flag")
        assert ran.code == 1
        assert "Unauthorized: bad token" in ran.err
        assert "s3cret" not in ran.err + ran.out
        monkeypatch.setenv("CEBROKER_TOKEN", "s3cret-variable")
        assert cli("subscriptions", "list", "--url", fake.url).code == 1
        sent = [r.headers.get("authorization") for r in fake.at("/subscriptions")]
        assert sent == ["Bearer s3cret-flag", "Bearer s3cret-variable"]


def test_json_output_of_get_is_the_api_document(cli: Cli, broker_url: str) -> None:
    sub = cli("subscriptions", "create", "--protocol", "HTTP", "--sink", "https://s.example/x").out.strip()
    assert (
        cli("subscriptions", "get", sub, "--json").json()
        == httpx.get(f"{broker_url}/subscriptions/{sub}").json()
    )


def test_send_reads_standard_input(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(_event(9))))
    ran = cli("events", "send", "--json")
    assert ran.code == 0, ran.err
    assert ran.json() == {"accepted": 1, "duplicates": 0}
    monkeypatch.setattr("sys.stdin", io.StringIO("not json"))
    refused = cli("events", "send")
    assert refused.code == 2
    assert refused.err.startswith("the event in standard input is not JSON")


def test_get_shows_the_replies_of_a_replying_subscription(cli: Cli, broker_url: str) -> None:
    with served_sink() as sink:
        answer = {"specversion": "1.0", "id": "cli-reply", "source": "/replier", "type": "com.example.answer"}
        sink.default["/svc"] = Reply(
            200, {"content-type": "application/cloudevents+json"}, json.dumps(answer).encode()
        )
        body = {
            "protocol": "HTTP",
            "sink": f"{sink.url}/svc",
            "types": ["com.example.cli"],
            "config": {"reply": "publish"},
        }
        sub_id = httpx.post(f"{broker_url}/subscriptions", json=body).json()["id"]
        structured = {"content-type": "application/cloudevents+json"}
        assert httpx.post(f"{broker_url}/events", json=_event(1), headers=structured).status_code == 202
        wait_until(
            lambda: (
                httpx.get(f"{broker_url}/subscriptions/{sub_id}/status")
                .json()
                .get("replies", {})
                .get("published")
                == 1
            ),
            timeout=15,
            message="the reply published",
        )
    shown = cli("subscriptions", "get", sub_id)
    assert shown.code == 0, shown.err
    lines = {
        line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
        for line in shown.out.splitlines()
        if ":" in line
    }
    assert lines["replies published"] == "1"
    assert lines["replies refused"] == "0"
