"""Refused messages are kept per source within bounds and served over HTTP; a source's gauge and
``/readyz`` tell the truth while it restarts or stalls (in-memory receivers drive the states
that real servers cannot be made to show on demand; tests/protocols covers the real servers)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from ceprotocols.receiver import Limits, OnEvents, OnReject, RawMessage, ReceiverStats, Reject
from ceprotocols.tracecontext import TraceContext
from support.servers import ServerThread

from cebroker.app import build_components, create_app
from cebroker.contracts import Event, IngestResult
from cebroker.settings import Settings
from cebroker.sources import component as sources_module
from cebroker.sources.component import SourcesComponent
from cebroker.sources.quarantine import MemoryRejects, quarantine


def _reject(n: int, payload: bytes = b"x", size: int | None = None) -> Reject:
    raw = RawMessage(size if size is not None else len(payload), payload, (("h", str(n)),))
    return Reject(f"reason {n}", raw, 1_700_000_000.0 + n)


class Told:
    """Records each broker event told, with the thread it was told on."""

    def __init__(self) -> None:
        self.told: list[tuple[str, dict[str, Any], str | None, int]] = []

    def emit(self, kind: str, data: Mapping[str, Any], *, tenant: str | None, key: str | None = None) -> None:
        self.told.append((kind, dict(data), tenant, threading.get_ident()))


async def test_a_reject_from_a_receiver_thread_is_told_on_the_loop() -> None:
    """Receivers may report from their own threads; the emitter (an asyncio queue) is not
    thread-safe, so the event is handed to the loop's thread."""
    told = Told()
    rejects = MemoryRejects()
    on_reject = quarantine("src", rejects, told, asyncio.get_running_loop())
    await asyncio.to_thread(on_reject, _reject(1, b"abc"))
    on_reject(_reject(2))  # on the loop: told at once
    await asyncio.sleep(0)  # the handed-over call runs
    loop_thread = threading.get_ident()
    assert len(rejects) == 2
    assert [(kind, tenant, thread) for kind, _, tenant, thread in told.told] == [
        ("source.quarantined", None, loop_thread),
        ("source.quarantined", None, loop_thread),
    ]
    first = next(data for _, data, _, _ in told.told if data["reason"] == "reason 1")
    assert first == {
        "source": "src",
        "reason": "reason 1",
        "size": 3,
        "time": rejects.page(0, 1)[0].to_json()["time"],
    }


def test_bounded_by_count_oldest_dropped_first() -> None:
    rejects = MemoryRejects(max_count=3)
    for n in range(5):
        rejects.add(_reject(n))
    assert [k.reject.reason for k in rejects.page(0, 10)] == ["reason 2", "reason 3", "reason 4"]
    assert rejects.dropped == 2
    assert [k.seq for k in rejects.page(4, 10)] == [5]


def test_bounded_by_bytes() -> None:
    rejects = MemoryRejects(max_count=100, max_bytes=10_000)
    for n in range(10):
        rejects.add(_reject(n, b"y" * 4000))
    assert len(rejects) == 2
    assert rejects.dropped == 8


def test_rendering_of_payloads() -> None:
    rejects = MemoryRejects()
    rejects.add(_reject(1, "héllo".encode()))
    rejects.add(_reject(2, b"\xff\xfe\x00"))
    rejects.add(_reject(3, "aé".encode()[:2], size=5000))  # cut inside a character
    text, binary, cut = (k.to_json() for k in rejects.page(0, 10))
    assert text["payload"] == "héllo"
    assert text["truncated"] is False
    assert binary["payloadBase64"] == "//4A"
    assert cut["payload"] == "a"
    assert cut["truncated"] is True
    assert text["time"] == "2023-11-14T22:13:21.000Z"
    assert text["headers"] == [{"name": "h", "value": "1"}]


class FakeReceiver:
    """Runs per a script: ``crash`` raises once, then it subscribes and reports two rejects."""

    def __init__(self, url: str, limits: Limits) -> None:
        self.source = url
        self.stats = ReceiverStats()
        self.crash = "crash" in url
        self.stall = "stall" in url
        self.runs = 0
        self.closed = asyncio.Event()

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        self.runs += 1
        if self.crash and self.runs == 1:
            raise RuntimeError("a bug")
        self.stats.subscribed = True
        if on_reject is not None:
            on_reject(_reject(1))
            on_reject(_reject(2, b"\xff\x01"))
        if self.stall:
            self.stats.alive_at = time.monotonic() - 3600  # polled long ago: stuck
        await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


class NoIngest:
    async def ingest(
        self, events: Sequence[Event], traces: Sequence[TraceContext | None] = ()
    ) -> IngestResult:
        return IngestResult(accepted=len(events), duplicates=0)


async def test_restart_is_counted_and_the_gauge_is_honest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources_module, "RESTART_PAUSE", 0.3)
    component = SourcesComponent(
        ["fake://h/crash", "fake://h/stall?name=stuck"],
        NoIngest(),
        receiver_factory=FakeReceiver,
        down_after=0.2,
    )
    await component.start()
    try:
        crashing, stalled = component.sources
        async with asyncio.timeout(10):
            while crashing.restarts == 0:  # noqa: ASYNC110 - polling an in-memory counter
                await asyncio.sleep(0.01)
        assert [up for _, up in component.health()] == [False, False]  # restarting; stalled
        async with asyncio.timeout(10):
            while not component.health()[0][1]:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert crashing.restarts == 1
        assert stalled.restarts == 0
        # Once down for longer than down_after, the stalled source is named; the other is back.
        async with asyncio.timeout(10):
            while [p.split(" has ")[0] for p in component.readiness()] != ["source stuck"]:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert len(crashing.rejects.page(0, 10)) == 2
    finally:
        await component.stop()


def test_rejects_and_readiness_over_http(tmp_path: Path) -> None:
    """``GET /sources``, ``GET /sources/{name}/rejects`` with paging, 404 and 400; ``/readyz``
    names the stalled source."""
    settings = Settings(db=tmp_path / "b.db", sources=("fake://h/ok?name=ok", "fake://h/stall"))
    parts = build_components(settings)
    sources = next(part for part in parts if isinstance(part, SourcesComponent))
    sources._factory = FakeReceiver  # the fake scheme: receivers in memory
    sources._down_after = 0.0
    with ServerThread(create_app(settings, parts)) as server, httpx.Client(base_url=server.url) as http:
        listed = http.get("/sources").json()
        assert [(s["name"], s["protocol"]) for s in listed] == [("ok", "fake"), ("fake-2", "fake")]
        first = http.get("/sources/ok/rejects", params={"limit": 1}).json()
        assert [i["reason"] for i in first["items"]] == ["reason 1"]
        second = http.get("/sources/ok/rejects", params={"after": first["next"]}).json()
        assert [i["payloadBase64"] for i in second["items"]] == ["/wE="]
        assert second["next"] is None
        assert http.get("/sources/nope/rejects").status_code == 404
        bad = http.get("/sources/ok/rejects", params={"limit": "x"})
        assert bad.status_code == 400
        assert bad.json()["errors"][0]["parameter"] == "limit"
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert [p.split(" has ")[0] for p in ready.json()["problems"]] == ["source fake-2"]
