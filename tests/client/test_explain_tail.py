"""``cebroker explain`` and ``cebroker tail`` against a real broker (``tail`` as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from client.conftest import Ran

Cli = Callable[..., Ran]


def _event(**extra: object) -> dict[str, object]:
    return {"specversion": "1.0", "id": "x-1", "source": "/shop", "type": "com.example.order", **extra}


def test_explain_stored_and_draft(cli: Cli, tmp_path: Path) -> None:
    sub = cli(
        "subscriptions",
        "create",
        "--protocol",
        "HTTP",
        "--sink",
        "https://s.example/x",
        "--sql",
        "amount > 100",
    ).out.strip()
    small = tmp_path / "small.json"
    small.write_text(json.dumps(_event(amount=3)))
    ran = cli("explain", sub, "--event", str(small))
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert lines[0] == "not matched"
    assert lines[1].split() == ["CONDITION", "RESULT", "DETAIL"]
    assert lines[2].split()[:2] == ["/filters/0", "NO"]
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps({"protocol": "HTTP", "sink": "https://s.example/x", "source": "/shop"}))
    answer = cli("explain", "--draft", str(draft), "--event", str(small), "--json").json()
    assert isinstance(answer, dict)
    assert answer["matched"] is True
    assert [c["pointer"] for c in answer["checks"]] == ["/source"]
    draft.write_text(json.dumps({"protocol": "HTTP"}))
    refused = cli("explain", "--draft", str(draft), "--event", str(small))
    assert refused.code == 1
    assert refused.err.splitlines()[1:] == [
        "Invalid request",
        "  /subscription/sink: is required: the URI to which events are delivered",
    ]
    assert cli("explain", "--event", str(small)).code == 2  # neither a subscription nor a draft


def test_explain_shows_the_transformed_event(cli: Cli, tmp_path: Path) -> None:
    """A draft with a transformation: the outgoing event, the drop, the failure."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps(_event(amount=3, datacontenttype="application/json", data={"n": 1})))
    draft = tmp_path / "draft.json"
    shape = (
        '{"type": "t.out", "source": "/out", "data": {"n": event.data.n + 1}, "$delivery": {"path": "/n"}}'
    )
    draft.write_text(
        json.dumps(
            {"protocol": "HTTP", "sink": "https://s.example/x", "config": {"transform": {"cel": shape}}}
        )
    )
    ran = cli("explain", "--draft", str(draft), "--event", str(event))
    assert ran.code == 0, ran.err
    text = ran.out.split("transform: ", 1)[1]
    assert text.splitlines()[0] == "delivered"
    assert '"https://s.example/x/n"' in text
    shown = json.loads(text.split("event:\n", 1)[1])
    assert shown == {"type": "t.out", "source": "/out", "data": {"n": 2}, "specversion": "1.0", "id": "x-1"}
    for cel, first, second in (("null", "dropped", None), ("event.data.nope", "failed", "nope")):
        draft.write_text(
            json.dumps(
                {"protocol": "HTTP", "sink": "https://s.example/x", "config": {"transform": {"cel": cel}}}
            )
        )
        lines = cli("explain", "--draft", str(draft), "--event", str(event)).out.split("transform: ", 1)[1]
        assert lines.splitlines()[0] == first
        if second is not None:
            assert second in lines.splitlines()[1]


def test_tail_prints_matched_events_as_they_come(broker_url: str, tmp_path: Path) -> None:
    http = httpx.Client(base_url=broker_url, timeout=10)
    sub = http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "types": ["com.example.order"]},
    ).json()["id"]
    env = {**os.environ, "CEBROKER_URL": broker_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cebroker", "tail", sub, "--count", "2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith(f"watching {sub}")  # the watch is registered
        for n, kind in enumerate(["com.example.other", "com.example.order", "com.example.order"]):
            body = _event(id=f"t-{n}", type=kind)
            r = http.post("/events", json=body, headers={"content-type": "application/cloudevents+json"})
            assert r.status_code == 202
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["t-1", "t-2"]
    http.close()


def test_tail_of_an_unknown_subscription_fails(cli: Cli) -> None:
    ran = cli("tail", "nope")
    assert ran.code == 1
    assert "404 Not Found" in ran.err


def test_tail_lines_show_the_trace_id(broker_url: str) -> None:
    """A text line ends with the id of the event's trace (here named by its own ``traceparent``
    attribute), or ``trace=-`` when it has none."""
    http = httpx.Client(base_url=broker_url, timeout=10)
    sub = http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "types": ["com.example.traced"]},
    ).json()["id"]
    env = {**os.environ, "CEBROKER_URL": broker_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cebroker", "tail", sub, "--count", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith(f"watching {sub}")
        for body in (
            _event(id="tr-1", type="com.example.traced", traceparent=f"00-{trace_id}-00f067aa0ba902b7-01"),
            _event(id="tr-2", type="com.example.traced"),
        ):
            r = http.post("/events", json=body, headers={"content-type": "application/cloudevents+json"})
            assert r.status_code == 202
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0
    first, second = out.splitlines()
    assert "tr-1" in first
    assert first.endswith(f"trace={trace_id}")
    assert "tr-2" in second
    assert second.endswith("trace=-")
    http.close()
