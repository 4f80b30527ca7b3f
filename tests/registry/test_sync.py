"""Pull replication between two running brokers (Schema Registry API 0.2 section 4, "Replication
Model": a target copies a source through its API and follows its change events)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from support.broker import Broker
from support.shared import XREGISTRY_SAMPLES
from support.waiting import async_wait_until, wait_until

from cebroker.cli import main
from cebroker.registry.sync import Replicator, follow, strip
from registry.support import SCENARIOS


def _definitions(export: dict[str, Any]) -> dict[str, Any]:
    """The export without what differs between two registries (ids, epochs, times, own endpoints)."""
    doc = {k: v for k, v in export.items() if k in ("messagegroups", "schemagroups", "endpoints")}
    doc["endpoints"] = {k: v for k, v in doc.get("endpoints", {}).items() if not k.startswith("cebroker.")}
    scrubbed: dict[str, Any] = _scrub(strip(doc))
    return scrubbed


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in ("createdat", "modifiedat")}
    return value


@XREGISTRY_SAMPLES.needed
def test_pull_copies_everything(make_broker: Callable[..., Broker]) -> None:
    """``registry sync --from`` copies groups, messages, schema versions, documents and defaults."""
    source, target = make_broker(), make_broker()
    for name in ("contoso-erp-jsons07.xreg.json", "inkjet-proto3.xreg.json"):
        assert source.http.post("/", json=json.loads((SCENARIOS / name).read_text())).status_code == 200
    headers = {"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"}
    source.http.put("/schemagroups/extra/schemas/s", content=b'{"type": "object"}', headers=headers)
    source.http.post("/schemagroups/extra/schemas/s", content=b'{"type": "array"}', headers=headers)
    source.http.patch("/schemagroups/extra/schemas/s/meta", json={"defaultversionid": "1"})
    assert main(["registry", "sync", "--from", source.url, "--to", target.url]) == 0
    want = _definitions(source.http.get("/export").json())
    got = _definitions(target.http.get("/export").json())
    assert len(want["messagegroups"]) == 8
    assert got == want
    assert target.http.get("/schemagroups/extra/schemas/s").content == b'{"type": "object"}'
    # the target advertises itself, not the source
    own = target.http.get("/endpoints/cebroker.subscriptions").json()
    assert own["subscriptionurl"].startswith("http://127.0.0.1:8080")  # the default public URL
    # a second pull is an update, not a duplicate
    assert main(["registry", "sync", "--from", source.url, "--to", target.url]) == 0
    assert _definitions(target.http.get("/export").json()) == want


def test_sync_reports_an_unreachable_source(make_broker: Callable[..., Broker], capsys: Any) -> None:
    """A source that does not answer is a clear error and exit status 1."""
    target = make_broker()
    assert (
        main(["registry", "sync", "--from", "http://127.0.0.1:9", "--to", target.url, "--timeout", "2"]) == 1
    )
    assert "registry sync failed" in capsys.readouterr().err


FOLLOWED = "the target to follow the source"


async def test_follow_applies_changes(make_broker: Callable[..., Broker]) -> None:
    """``--follow`` subscribes at the source and applies its change events, deletes included;
    the source runs the webhook validation handshake against the follower's sink."""
    source, target = make_broker(webhook_validation=True), make_broker()
    async with httpx.AsyncClient(timeout=10) as client:
        await client.put(f"{source.url}/messagegroups/before", json={"description": "made before following"})
        replicator = Replicator(source.url, target.url, client)
        stop = asyncio.Event()
        task = asyncio.create_task(follow(replicator, "127.0.0.1", 0, stop))

        async def target_has(path: str, present: bool = True) -> bool:
            status = (await client.get(f"{target.url}{path}")).status_code
            return status == 200 if present else status == 404

        await async_wait_until(lambda: target_has("/messagegroups/before"), 60, FOLLOWED, interval=0.1)
        subs = (await client.get(f"{source.url}/subscriptions")).json()
        assert len(subs) == 1
        await client.put(f"{source.url}/messagegroups/g/messages/m", json={"description": "v1"})
        await async_wait_until(lambda: target_has("/messagegroups/g/messages/m"), 60, FOLLOWED, interval=0.1)
        await client.patch(f"{source.url}/messagegroups/g/messages/m", json={"description": "v2"})

        async def updated() -> bool:
            r = await client.get(f"{target.url}/messagegroups/g/messages/m")
            return r.status_code == 200 and r.json().get("description") == "v2"

        await async_wait_until(updated, 60, FOLLOWED, interval=0.1)
        await client.delete(f"{source.url}/messagegroups/g/messages/m")
        await async_wait_until(
            lambda: target_has("/messagegroups/g/messages/m", present=False), 60, FOLLOWED, interval=0.1
        )
        stop.set()
        await asyncio.wait_for(task, 60)
        assert (await client.get(f"{source.url}/subscriptions")).json() == []  # unsubscribed on stop


def test_cli_follow_until_interrupted(make_broker: Callable[..., Broker]) -> None:
    """``cebroker registry sync --follow`` runs until SIGINT, then removes its subscription."""
    source, target = make_broker(), make_broker()
    cmd = [sys.executable, "-m", "cebroker", "registry", "sync", "--from", source.url, "--to", target.url]
    proc = subprocess.Popen([*cmd, "--follow", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)

    def subscribed() -> bool:
        assert proc.poll() is None, "the follower exited early"
        return bool(source.http.get("/subscriptions").json())

    try:
        began = time.monotonic()  # one minute for both waits
        wait_until(subscribed, 60, "the follower to subscribe at the source", interval=0.1)
        source.http.put(
            "/schemagroups/live/schemas/s", content=b"{}", headers={"content-type": "application/json"}
        )
        wait_until(
            lambda: target.http.get("/schemagroups/live/schemas/s").status_code == 200,
            60 - (time.monotonic() - began),
            "the change to arrive at the target",
            interval=0.1,
        )
        assert target.http.get("/schemagroups/live/schemas/s").content == b"{}"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    assert source.http.get("/subscriptions").json() == []
