"""Broker events (``--broker-events on``): one ``circuit.opened`` when a real sink goes down and
one ``circuit.closed`` when it comes back (not one per failed attempt); a dead letter's event,
whose own dead letter begets no other; subscription changes; a tenant's subscriptions see only
that tenant's broker events while an admin's see all; reserved types refused to publishers;
nothing emitted when off."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_for

from cebroker.contracts import IngestResult
from cebroker.pipeline.brokerevents import BrokerEvents
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.health import StorageHealth

CIRCUIT = ["dev.cebroker.circuit.opened", "dev.cebroker.circuit.closed"]
STRUCTURED = {"contentmode": "structured"}
FAST = {"initialdelay": "0.05", "maxdelay": "0.2", "probemaxdelay": "0.3"}


def types_at(sink: Sink, path: str) -> list[str]:
    return [e["type"] for e in sink.events(path)]


def emitted(broker: Broker) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in broker.http.get("/metrics").text.splitlines():
        if line.startswith("cebroker_broker_events_total{"):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            counts[outcome] = float(line.split()[-1])
    return counts


def test_a_sink_down_then_back_gives_one_opened_and_one_closed(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(broker_events=True)
    broker.subscribe(f"{sink.url}/ops", types=CIRCUIT, protocolsettings=STRUCTURED)
    down = broker.subscribe(f"{sink.url}/down", types=["com.example.test"], config=FAST)
    sink.default["/down"] = Reply(503)
    for n in range(12):
        assert broker.send(event(n)).status_code == 202
    (opened,) = sink.wait("/ops", 1)
    doc = json.loads(opened.body)
    assert doc["type"] == "dev.cebroker.circuit.opened"
    assert doc["data"]["subscription"] == down["id"]
    assert doc["source"].startswith("/cebroker/")
    wait_for(lambda: len(sink.at("/down")), lambda n: n >= 8, 15.0, "probes of the sink that is down")
    sink.default["/down"] = Reply(200)
    sink.wait("/ops", 2)
    broker.settled()
    assert types_at(sink, "/ops") == CIRCUIT
    assert sink.events("/ops")[1]["data"]["subscription"] == down["id"]
    assert emitted(broker).get("dropped", 0.0) == 0.0


def test_a_dead_letter_emits_one_event_and_its_own_dead_letter_none(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(broker_events=True)
    # The subscription to dead letters refuses what it gets: its dead letters are broker events.
    watcher = broker.subscribe(
        f"{sink.url}/dead",
        types=["dev.cebroker.delivery.deadlettered"],
        protocolsettings=STRUCTURED,
        config={"maxattempts": "1"},
    )
    sink.default["/dead"] = Reply(400)
    failing = broker.subscribe(f"{sink.url}/fails", types=["com.example.test"], config={"maxattempts": "1"})
    sink.default["/fails"] = Reply(400)
    assert broker.send(event(1)).status_code == 202
    (got,) = sink.wait("/dead", 1)
    doc = json.loads(got.body)
    assert doc["data"]["subscription"] == failing["id"]
    assert doc["data"]["event"] == {"id": "e-1", "source": "/tests", "type": "com.example.test"}
    assert doc["data"]["attempts"] == 1
    broker.settled()
    assert broker.status(watcher)["deadlettered"] == 1
    # Two subscriptions created and one dead letter: three, and no more.
    wait_for(lambda: emitted(broker), lambda c: c.get("emitted") == 3.0, 10.0, "three broker events")
    assert len(sink.at("/dead")) == 1


KEYS = {"admin": "cbk_admin-key", "acme": "cbk_acme-key", "globex": "cbk_globex-key"}
SCOPES = ["subscriptions:read", "subscriptions:write", "events:publish"]


def test_tenants_see_only_their_own_broker_events(
    make_broker: Callable[..., Broker], tmp_path: Path, sink: Sink
) -> None:
    keys = [
        {"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest()}
        | ({"scopes": ["admin"]} if name == "admin" else {"tenant": name, "scopes": SCOPES})
        for name, key in KEYS.items()
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    broker = make_broker(
        broker_events=True, api_keys=tmp_path / "keys.json", allow_sink_networks=("127.0.0.0/8",)
    )

    def create(who: str, path: str, **fields: Any) -> dict[str, Any]:
        body = {"protocol": "HTTP", "sink": f"{sink.url}{path}", "protocolsettings": STRUCTURED, **fields}
        response = broker.http.post(
            "/subscriptions", json=body, headers={"authorization": f"Bearer {KEYS[who]}"}
        )
        assert response.status_code == 201, response.text
        return dict(response.json())

    created = ["dev.cebroker.subscription.created"]
    create("admin", "/admin-ops", types=created)
    create("acme", "/acme-ops", types=created)
    create("globex", "/globex-ops", types=created)
    acme_sub = create("acme", "/acme-other", types=["com.example.none"])
    globex_sub = create("globex", "/globex-other", types=["com.example.none"])
    sink.wait("/admin-ops", 5)
    broker.http.headers.update({"authorization": f"Bearer {KEYS['admin']}"})
    broker.settled()
    acme = sink.events("/acme-ops")
    globex = sink.events("/globex-ops")
    assert {e["cebrokertenant"] for e in acme} == {"acme"}
    assert {e["cebrokertenant"] for e in globex} == {"globex"}
    assert acme_sub["id"] in {e["data"]["subscription"] for e in acme}
    assert globex_sub["id"] not in {e["data"]["subscription"] for e in acme}
    assert globex_sub["id"] in {e["data"]["subscription"] for e in globex}
    assert {e.get("cebrokertenant") for e in sink.events("/admin-ops")} == {None, "acme", "globex"}


def test_reserved_types_are_refused_to_publishers(broker: Broker) -> None:
    refused = broker.send(event(1, type="dev.cebroker.circuit.opened"))
    assert refused.status_code == 403
    assert "the broker's own events" in refused.json()["detail"]


def test_nothing_is_emitted_when_off(broker: Broker, sink: Sink) -> None:
    broker.subscribe(f"{sink.url}/all")
    broker.subscribe(f"{sink.url}/more")
    assert broker.send(event(1)).status_code == 202
    broker.settled()
    assert sink.ids("/all") == ["e-1"]
    assert emitted(broker) == {}


def test_the_registry_describes_them_and_enforce_validates_them(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(broker_events=True, event_validation="enforce")
    exported = broker.http.get("/export").json()
    group = exported["messagegroups"]["dev.cebroker"]
    messages = group["messages"]
    assert set(messages) == {
        "dev.cebroker.circuit.opened",
        "dev.cebroker.circuit.closed",
        "dev.cebroker.delivery.deadlettered",
        "dev.cebroker.subscription.created",
        "dev.cebroker.subscription.updated",
        "dev.cebroker.subscription.deleted",
        "dev.cebroker.redrive.done",
        "dev.cebroker.replay.started",
        "dev.cebroker.replay.finished",
        "dev.cebroker.source.quarantined",
        "dev.cebroker.storage.unavailable",
        "dev.cebroker.storage.available",
    }
    created = messages["dev.cebroker.subscription.created"]
    version = created["versions"][created["meta"]["defaultversionid"]] if "versions" in created else created
    assert version["dataschema"]["required"] == ["protocol", "revision", "sink", "subscription"]
    # Checked against those definitions on the way in (enforce), and delivered: none dropped.
    ops = broker.subscribe(
        f"{sink.url}/ops", types=["dev.cebroker.subscription.created"], protocolsettings=STRUCTURED
    )
    other = broker.subscribe(f"{sink.url}/other", types=["com.example.none"])
    # Both may be in flight at once (concurrency 8): they can arrive in either order.
    got = sorted(json.loads(r.body)["data"]["subscription"] for r in sink.wait("/ops", 2))
    assert got == sorted([ops["id"], other["id"]])
    assert emitted(broker).get("dropped", 0.0) == 0.0
    # A definition the events do not meet: enforce refuses them, and the drop is counted.
    stricter = {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "dev.cebroker.subscription.created"}},
        "dataschemaformat": "JsonSchema/draft-07",
        "dataschema": {"type": "object", "required": ["nothing-has-this"]},
    }
    path = "/messagegroups/dev.cebroker/messages/dev.cebroker.subscription.created"
    assert broker.http.put(path, json=stricter).status_code in (200, 201)
    broker.subscribe(f"{sink.url}/third", types=["com.example.none"])
    wait_for(lambda: emitted(broker), lambda c: c.get("dropped") == 1.0, 10.0, "one broker event dropped")
    assert len(sink.at("/ops")) == 2


def test_a_redrive_and_a_replay_are_announced(make_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = make_broker(broker_events=True)
    broker.subscribe(
        f"{sink.url}/ops",
        types=["dev.cebroker.redrive.done", "dev.cebroker.replay.started", "dev.cebroker.replay.finished"],
        protocolsettings=STRUCTURED,
        config={"concurrency": "1"},  # one at a time: delivered in the order they were emitted
    )
    failing = broker.subscribe(f"{sink.url}/fails", types=["com.example.test"], config={"maxattempts": "1"})
    sink.default["/fails"] = Reply(400)
    since = datetime.now(UTC) - timedelta(seconds=5)
    assert broker.send(event(1)).status_code == 202
    broker.settled()
    sink.default["/fails"] = Reply(200)
    redrive = broker.http.post(f"/subscriptions/{failing['id']}/deadletters/redrive")
    assert redrive.json() == {"redriven": 1}
    (done,) = [json.loads(r.body) for r in sink.wait("/ops", 1)]
    assert done["type"] == "dev.cebroker.redrive.done"
    assert done["data"] == {"subscription": failing["id"], "redriven": 1, "chosen": False}
    window = {"from": since.isoformat().replace("+00:00", "Z")}
    started = broker.http.post(f"/subscriptions/{failing['id']}/replay", json=window)
    assert started.status_code == 202, started.text
    sink.wait("/ops", 2)
    replayed = sink.events("/ops")[1]
    assert replayed["type"] == "dev.cebroker.replay.started"
    assert replayed["data"] == {
        "subscription": failing["id"],
        "replay": started.json()["replay"],
        "events": 1,
    }
    sink.wait("/ops", 3)
    finished = sink.events("/ops")[2]
    assert finished["type"] == "dev.cebroker.replay.finished"
    assert finished["id"] == f"replay.finished/{started.json()['replay']}"
    assert finished["data"] == {
        "subscription": failing["id"],
        "replay": started.json()["replay"],
        "state": "done",
        "matched": 1,
        "delivered": 1,
        "deadlettered": 0,
        "removed": 0,
    }
    assert len(sink.at("/fails")) == 3  # the first attempt, the redrive, the replay


def test_a_cancelled_replay_is_announced_finished(make_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = make_broker(broker_events=True)
    broker.subscribe(f"{sink.url}/ops", types=["dev.cebroker.replay.finished"], protocolsettings=STRUCTURED)
    down = broker.subscribe(f"{sink.url}/down", types=["com.example.test"], config=FAST)
    sink.default["/down"] = Reply(503)
    since = datetime.now(UTC) - timedelta(seconds=5)
    for n in range(3):
        assert broker.send(event(n)).status_code == 202
    window = {"from": since.isoformat().replace("+00:00", "Z")}
    started = broker.http.post(f"/subscriptions/{down['id']}/replay", json=window)
    assert started.status_code == 202, started.text
    replay = started.json()["replay"]
    cancelled = broker.http.delete(f"/subscriptions/{down['id']}/replays/{replay}")
    assert cancelled.json()["state"] == "cancelled"
    (got,) = [json.loads(r.body) for r in sink.wait("/ops", 1)]
    assert got["type"] == "dev.cebroker.replay.finished"
    assert got["id"] == f"replay.finished/{replay}"
    assert got["data"]["replay"] == replay
    assert got["data"]["state"] == "cancelled"
    assert got["data"]["delivered"] == 0


async def test_events_wait_while_the_storage_is_unavailable() -> None:
    health = StorageHealth("test storage")
    causes: list[str | None] = []
    health.observe(causes.append)
    health.failed(StorageUnavailable("disk full"))
    health.failed(StorageUnavailable("disk full"))  # the same episode: told once
    health.succeeded()
    assert causes == ["disk full", None]

    down = [True]
    got: list[dict[str, Any]] = []
    tries: list[int] = []

    async def publish(events: Sequence[dict[str, Any]]) -> IngestResult:
        tries.append(len(events))
        if down[0]:
            raise StorageUnavailable("disk full")
        got.extend(events)
        return IngestResult(accepted=len(events), duplicates=0)

    registry = CollectorRegistry()
    counter = Counter("events", "test", ["outcome"], registry=registry)
    emitter = BrokerEvents(publish, source="/cebroker/test", enabled=True, counter=counter)
    emitter.start()
    emitter.emit("storage.unavailable", {"cause": "disk full"}, tenant=None)
    for _ in range(100):
        if tries:
            break
        await asyncio.sleep(0.01)
    assert tries  # tried and refused: held, not dropped
    assert not got
    down[0] = False
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.05)
    await emitter.stop()
    assert [e["type"] for e in got] == ["dev.cebroker.storage.unavailable"]
    assert len(tries) >= 2
    assert "cebrokertenant" not in got[0]
    assert registry.get_sample_value("events_total", {"outcome": "dropped"}) is None
