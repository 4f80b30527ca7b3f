"""A circuit per sink, against a real broker and real HTTP sinks, on a clock that moves only when
told: a sink that is down gets probes, not the backlog; the broker's database does not grow
while it waits; the backlog flows at once when the sink is back; deliveries still expire by
their time to live; a failure about one event keeps its own backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from support.broker import Broker
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_until

from pipeline.clocks import ManualClock

BATCH = {"content-type": "application/cloudevents-batch+json"}
#: Counting failures in a row that open a circuit (cebroker.pipeline.dispatch.circuit).
OPEN_AFTER = 5


def ingest(broker: Broker, count: int, *, start: int = 0, batch: int = 1000, **extra: Any) -> None:
    for first in range(start, start + count, batch):
        events = [event(n, **extra) for n in range(first, min(start + count, first + batch))]
        answer = broker.http.post("/events", content=orjson.dumps(events), headers=BATCH)
        assert answer.status_code == 202, answer.text


def circuit(broker: Broker, sub: dict[str, Any]) -> dict[str, Any]:
    return dict(broker.status(sub)["circuit"])


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def db_size(path: Path) -> int:
    """The database file and its WAL, in bytes."""
    return path.stat().st_size + wal_size(path)


def probe_once(broker: Broker, sub: dict[str, Any], clock: ManualClock) -> dict[str, Any]:
    """Move the clock to the next probe and wait until that probe's outcome is recorded;
    the circuit's state afterwards."""
    before = circuit(broker, sub)
    assert before["state"] == "open", before
    clock.advance(max(0.0, epoch(before["nextProbeAt"]) - clock.now()) + 0.001)

    def recorded() -> dict[str, Any] | None:
        now = circuit(broker, sub)
        if now["state"] == "closed" or (
            now["state"] == "open" and now["failedProbes"] > before["failedProbes"]
        ):
            return now
        return None

    after = wait_until(recorded, timeout=30)
    assert after is not None
    return after


def ids_at(sink: Sink, path: str, status: Callable[[Received], bool] = lambda r: True) -> list[str]:
    return [str(orjson.loads(r.body)["n"]) for r in sink.at(path) if status(r)]


def test_an_outage_costs_the_sink_probes_only_and_the_backlog_flows_at_once(
    make_broker: Callable[..., Broker], sink: Sink, tmp_path: Path
) -> None:
    """20,000 deliveries wait for a sink answering 503: once the circuit is open the sink gets
    one probe at a time (a 90 s outage: a dozen attempts, whatever the backlog), the database
    and its WAL do not grow, deliveries never attempted keep their attempts budget, and the
    first probe that gets through lets the whole backlog arrive within seconds."""
    total = 20_000
    clock = ManualClock()
    broker = make_broker(clock=clock)
    down = [True]
    answered: dict[str, int] = {"503": 0}

    def respond(got: Received) -> Reply | None:
        if down[0]:
            answered["503"] += 1
            return Reply(503)
        return None

    sink.responder = respond
    sub = broker.subscribe(f"{sink.url}/hook", config={"maxattempts": "3"})
    ingest(broker, total)
    wait_until(lambda: circuit(broker, sub)["state"] == "open")
    db = tmp_path / "broker0.db"
    # The ingest's WAL is copied into the database file and cut back once the writer is quiet.
    wait_until(lambda: wal_size(db) < 1024 * 1024)
    size_before = db_size(db)
    largest = size_before
    # The attempts in flight when it opened end; then only probes go out.
    first = probe_once(broker, sub, clock)
    assert first["state"] == "open"
    assert first["failedProbes"] == 1
    before_outage = answered["503"] - 1
    assert before_outage <= OPEN_AFTER + 8  # the streak, plus what was in flight (concurrency 8)
    started = clock.now()
    probes = 1
    while clock.now() - started < 90:
        state = probe_once(broker, sub, clock)
        probes += 1
        assert state["failedProbes"] == probes
        # Capped backoff: never more than the default cap of 10 s between probes.
        assert epoch(state["nextProbeAt"]) - clock.now() <= 10.0 + 0.01
        largest = max(largest, db_size(db))
    assert answered["503"] == before_outage + probes  # one request per probe, nothing else
    assert probes <= 20  # 1 + 2 + 4 + 8, then every 10 s: independent of the 20,000 waiting
    status = broker.status(sub)
    assert status["pending"] == total
    assert status["deadlettered"] == 0  # maxattempts 3: attempts never made do not count
    assert status["failed"] == answered["503"]
    # No row is rewritten per waiting delivery while the sink is down.
    assert max(largest, db_size(db)) <= size_before + 2 * 1024 * 1024
    # The sink is back: the next probe closes the circuit and everything arrives at once.
    down[0] = False
    clock.advance(max(0.0, epoch(circuit(broker, sub)["nextProbeAt"]) - clock.now()) + 0.001)
    probed = time.monotonic()
    wait_until(lambda: len(sink.at("/hook")) - answered["503"] >= total, timeout=120)
    drained = time.monotonic() - probed
    delivered = ids_at(sink, "/hook")[-total:]
    assert sorted(delivered, key=int) == [str(n) for n in range(total)]  # nothing lost, none twice
    assert drained < 60, f"the backlog took {drained:.1f}s to drain"
    assert circuit(broker, sub)["state"] == "closed"
    broker.settled()
    assert broker.status(sub)["delivered"] == total


def test_deliveries_expire_by_their_time_to_live_while_the_circuit_is_open(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    """No attempt is made for them, yet they become dead letters once their ttl has passed, with
    a reason saying since when the sink has been unavailable; the sink saw only probes."""
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sink.default["/down"] = Reply(503)
    sub = broker.subscribe(f"{sink.url}/down", config={"ttl": "60", "concurrency": "1"})
    ingest(broker, 40)
    wait_until(lambda: circuit(broker, sub)["state"] == "open")
    opened = circuit(broker, sub)["openedAt"]
    for _ in range(3):
        probe_once(broker, sub, clock)
    attempts = len(sink.at("/down"))
    clock.advance(61)
    wait_until(lambda: broker.status(sub)["deadlettered"] == 40)
    status = broker.status(sub)
    assert status["pending"] == 0
    letters = broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"]
    assert len(letters) == 40
    reasons = {letter["lastError"] for letter in letters}
    assert all(f"the sink has been unavailable since {opened}" in reason for reason in reasons), reasons
    assert all("sink answered 503" in reason for reason in reasons)
    assert sum(letter["attempts"] for letter in letters) == attempts  # attempts made, none invented
    assert min(letter["attempts"] for letter in letters) == 0
    assert len(sink.at("/down")) <= attempts + 1  # at most the probe that was due


def test_a_failure_about_one_event_keeps_its_own_backoff(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    """A payload the sink answers 500 for while it takes the others: retried on its own backoff
    far more than the circuit's threshold, and the circuit never opens."""
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sink.responder = lambda got: Reply(500) if orjson.loads(got.body)["n"] == 0 else None
    sub = broker.subscribe(f"{sink.url}/mixed", config={"concurrency": "1", "maxdelay": "1"})
    ingest(broker, 1)
    sink.wait("/mixed", 1)
    for round_ in range(1, 2 * OPEN_AFTER):
        ingest(broker, 3, start=100 * round_)  # others get through meanwhile
        sink.wait("/mixed", 1 + 4 * round_ - 1)
        clock.advance(1.01)  # the poison event's retry falls due
        sink.wait("/mixed", 1 + 4 * round_)
    poisoned = [r for r in sink.at("/mixed") if orjson.loads(r.body)["n"] == 0]
    assert len(poisoned) == 2 * OPEN_AFTER
    assert circuit(broker, sub)["state"] == "closed"
    metrics = broker.http.get("/metrics").text
    assert f'cebroker_circuit_open{{subscription="{sub["id"]}"}}' not in metrics
    assert f'cebroker_circuit_probes_total{{subscription="{sub["id"]}"}}' not in metrics


def test_an_open_circuit_outlives_a_restart_and_shows_in_status_and_metrics(
    make_broker: Callable[..., Broker], sink: Sink, tmp_path: Path
) -> None:
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sink.default["/down"] = Reply(503, headers={"Retry-After": "7"})
    sub = broker.subscribe(f"{sink.url}/down")
    ingest(broker, 20)
    wait_until(lambda: circuit(broker, sub)["state"] == "open")
    state = circuit(broker, sub)
    assert state["lastError"] == "sink answered 503"
    # Retry-After (7 s) wins over the first probe delay (initialdelay, 1 s).
    assert epoch(state["nextProbeAt"]) - epoch(state["openedAt"]) >= 7.0 - 0.01
    metrics = broker.http.get("/metrics").text
    assert f'cebroker_circuit_open{{subscription="{sub["id"]}"}} 1.0' in metrics
    listed = broker.http.get("/status/subscriptions").json()["items"]
    assert [item["circuit"] for item in listed] == [state]
    broker.server.stop()
    # Counted once the first broker is stopped: attempts in flight when the circuit opened may
    # reach the sink after it shows open.
    attempts = len(sink.at("/down"))
    again = make_broker(clock=clock, db=tmp_path / "broker0.db")
    assert circuit(again, sub) == state  # still open: the restarted broker sends no backlog
    assert len(sink.at("/down")) == attempts
    sink.default["/down"] = Reply(200)
    probe_once(again, sub, clock)
    again.settled()
    assert again.status(sub)["delivered"] == 20
    metrics = again.http.get("/metrics").text
    assert f'cebroker_circuit_open{{subscription="{sub["id"]}"}} 0.0' in metrics


def test_replacing_the_sink_closes_its_circuit_and_other_changes_do_not(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sink.default["/down"] = Reply(503)
    sub = broker.subscribe(f"{sink.url}/down")
    ingest(broker, 30)
    wait_until(lambda: circuit(broker, sub)["state"] == "open")
    body = {"protocol": "HTTP", "sink": f"{sink.url}/down", "config": {"concurrency": "4"}}
    assert broker.http.put(f"/subscriptions/{sub['id']}", json=body).status_code == 200
    assert probe_once(broker, sub, clock)["state"] == "open"  # same sink: still down
    body["sink"] = f"{sink.url}/up"
    assert broker.http.put(f"/subscriptions/{sub['id']}", json=body).status_code == 200
    wait_until(lambda: len(sink.at("/up")) == 30)  # no clock moved: the new sink at once
    assert circuit(broker, sub)["state"] == "closed"
