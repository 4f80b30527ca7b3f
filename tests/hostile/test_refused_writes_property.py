"""Refused means unchanged (property test): generated writes to every write route, each with
exactly one defect (too deep, not Unicode text, a duplicate member, a number out of range, a bad
query parameter, a bad id or attribute next to valid entities in the same body), are all refused,
and afterwards every table of the database and the stream of change events are exactly as
before: nothing is half-written, no change event leaves for a write that did not happen."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.servers import ServerThread
from support.sinks import served_sink

from cebroker.app import create_app
from cebroker.settings import Settings
from hostile.support import snapshot

GROUP = {"envelope": "CloudEvents/1.0", "description": "a group"}
MESSAGE = {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "t"}}}
SUBSCRIPTION = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/x", "types": ["never"]}

#: (method, path, a valid body): every route that writes something.
WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/subscriptions", SUBSCRIPTION),
    ("PUT", "/subscriptions/{sid}", SUBSCRIPTION),
    ("POST", "/subscriptions/{sid}/deadletters/redrive", {"ids": [1, 2]}),
    ("PUT", "/", {"description": "root"}),
    ("PATCH", "/", {"description": "root"}),
    ("POST", "/", {"messagegroups": {"new1": GROUP}, "schemagroups": {"new2": {}}}),
    ("PUT", "/messagegroups/g", GROUP),
    ("PATCH", "/messagegroups/g", {"description": "patched"}),
    ("POST", "/messagegroups", {"new3": GROUP, "new4": {"messages": {"m": MESSAGE}}}),
    ("POST", "/messagegroups/g", {"messages": {"new5": MESSAGE}}),
    ("PUT", "/messagegroups/g/messages/m", MESSAGE),
    ("POST", "/messagegroups/g/messages/m", MESSAGE),
    ("PUT", "/schemagroups/s/schemas/x$details", {"schema": {"type": "object"}}),
    ("PUT", "/schemagroups/s/schemas/new6$details", {"schema": {"type": "object"}}),
    ("PUT", "/endpoints/e", {"usage": ["producer"], "protocol": "HTTP"}),
    ("DELETE", "/schemagroups", {"s": {}}),
]
BAD_QUERY = [
    "inline=bogus",
    "epoch=x",
    "specversion=0.1",
    "filter=(((",
    "ignore=epoch&inline=no",
]
#: A member the registry keeps as an entity map: a bad entry there must undo the good ones.
BAD_ENTRIES = [("bad id!", GROUP), ("", GROUP), ("x" * 300, GROUP), ("ok", {"envelope": 5}), ("ok", [1])]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` that holds a value (for putting a defect there)."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*path, index))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _deep(levels: int) -> Any:
    value: Any = 1
    for n in range(levels):
        value = [value] if n % 2 else {"d": value}
    return value


@st.composite
def bad_writes(draw: st.DrawFn) -> tuple[str, str, bytes, str]:
    """(method, path with query, body, defect) with exactly one defect."""
    method, path, body = draw(st.sampled_from(WRITES))
    defect = draw(st.sampled_from(["deep", "surrogate", "duplicate", "huge-number", "query", "entry"]))
    where = draw(st.sampled_from(_paths(body)[1:] or [()]))
    query = ""
    if defect == "deep":
        body = _replace(body, where, _deep(draw(st.integers(129, 400))))
    elif defect == "surrogate":
        body = _replace(body, where, draw(st.sampled_from(["\ud800", "a\udfffb", {"\udc80": 1}])))
    elif defect == "huge-number":
        body = _replace(body, where, draw(st.sampled_from([2**64, -(2**63) - 1, 10**30])))
    elif defect == "query":
        query = draw(st.sampled_from(BAD_QUERY))
    elif defect == "entry" and isinstance(body, dict):
        maps = [p for p in _paths(body) if p and p[-1] in ("messagegroups", "schemagroups", "messages")]
        key, entry = draw(st.sampled_from(BAD_ENTRIES))
        if maps and path.endswith(("/", "/messagegroups", "/g")):
            target = draw(st.sampled_from(maps))
            current: Any = body
            for part in target:
                current = current[part]
            body = _replace(body, target, {**current, key: entry})
        elif path == "/messagegroups":
            body = {**body, key: entry}
        else:
            query = draw(st.sampled_from(BAD_QUERY))  # no entity map here: a bad flag instead
    text = json.dumps(body)  # ensure_ascii: an unpaired surrogate travels as its \ud800 escape
    if defect == "duplicate":
        text = text[:-1] + (", " if len(text) > 2 else "") + '"dup": 1, "dup": 2}'
    return method, path + (f"?{query}" if query else ""), text.encode(), defect


def test_refused_writes_change_nothing(tmp_path: Path) -> None:
    app = create_app(Settings(db=tmp_path / "b.db", webhook_validation=False))
    with (
        served_sink() as sink,
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert (
            http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/all"}).status_code
            == 201
        )
        sid = http.post("/subscriptions", json=SUBSCRIPTION).json()["id"]
        assert http.put("/messagegroups/g", json=GROUP).status_code == 201
        assert http.put("/messagegroups/g/messages/m", json=MESSAGE).status_code == 201
        assert http.put("/schemagroups/s/schemas/x", json={"type": "object"}).status_code == 201
        assert http.put("/endpoints/e", json={"usage": ["producer"], "protocol": "HTTP"}).status_code == 201
        db = tmp_path / "b.db"
        deadline = time.monotonic() + 30
        while snapshot(db)["pipeline_deliveries"] and time.monotonic() < deadline:
            time.sleep(0.05)
        before = snapshot(db)
        assert before["xreg_entity"]
        assert not before["pipeline_deliveries"]
        delivered = len(sink.at("/all"))

        @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
        @given(bad_writes())
        def refused(write: tuple[str, str, bytes, str]) -> None:
            method, path, body, defect = write
            r = http.request(
                method, path.format(sid=sid), content=body, headers={"content-type": "application/json"}
            )
            assert 400 <= r.status_code < 500, (defect, r.status_code, r.text[:300])
            assert r.headers["content-type"] == "application/problem+json"
            assert snapshot(db) == before, (method, path, defect)

        refused()
        # Had a refused write emitted change events, they would be in the log ahead of those of a
        # write accepted now: once that one's events are delivered and nothing is pending, the
        # sink holds every change event there was since the baseline.
        assert http.patch("/messagegroups/g", json={"description": "marker"}).status_code == 200
        deadline = time.monotonic() + 30
        while len(sink.at("/all")) == delivered or snapshot(db)["pipeline_deliveries"]:
            assert time.monotonic() < deadline, "the marker change was not delivered"
            time.sleep(0.05)
        subjects = {r.headers.get("ce-subject") for r in sink.at("/all")[delivered:]}
        assert subjects == {"/messagegroups/g"}
