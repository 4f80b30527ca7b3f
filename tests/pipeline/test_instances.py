"""Many instances, one broker: three ``cebroker serve`` processes on one PostgreSQL database
behind no balancer but the test's round robin, delivering to real HTTP sinks.

* a subscription created on one instance applies to events posted to the others;
* events posted round-robin while one instance is SIGKILLed mid-stream all reach the sink
  (duplicates only from the killed instance's claims in flight; the count is reported);
* deleting a subscription on one instance stops deliveries from all;
* concurrency and rate limit hold for the subscription over all instances;
* PostgreSQL stopped and restarted under load: no 500, nothing accepted lost, recovery by itself;
* a message definition written on one instance is enforced (``--event-validation``) by the others;
* an instance away longer than the change log is kept catches up by comparing every subscription.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Callable

import httpx
import psycopg
import pytest
from servers.postgres import PostgresServer
from support.broker import BrokerProcess, BrokerProcesses
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BATCH = {"content-type": "application/cloudevents-batch+json"}
STRUCTURED = {"content-type": "application/cloudevents+json"}


@pytest.fixture
def start(broker_processes: BrokerProcesses) -> Callable[..., BrokerProcess]:
    """``start(db, *flags)``: a ready ``cebroker serve`` on the database ``db`` (a PostgreSQL
    URL), with a short instance lease; all are ended after the test."""
    logs = itertools.count()

    def launch(db: str, *extra: str) -> BrokerProcess:
        flags = ("--webhook-validation", "off", "--instance-lease", "2s", "--log-level", "warning", *extra)
        return broker_processes(db, f"broker-{next(logs)}.log", *flags).start().ready()

    return launch


def subscribe(url: str, sink: str, **fields: object) -> str:
    response = httpx.post(f"{url}/subscriptions", json={"protocol": "HTTP", "sink": sink, **fields})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_a_subscription_made_on_one_instance_applies_on_the_others(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    a, b, c = start(postgres_url), start(postgres_url), start(postgres_url)
    subscribe(a.url, f"{sink.url}/hook", types=["t.one"])
    # No wait: the answer above came back, so every instance must match the next event with it.
    for n, instance in enumerate([b, c, b, c]):
        sent = httpx.post(
            f"{instance.url}/events",
            json={**event(n), "type": "t.one"},
            headers={"content-type": "application/cloudevents+json"},
        )
        assert sent.status_code == 202
    got = sink.wait("/hook", 4)
    assert sorted(r.headers["ce-id"] for r in got) == [f"e-{n}" for n in range(4)]


def test_round_robin_with_one_instance_killed_loses_nothing_accepted(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    instances = [start(postgres_url) for _ in range(3)]
    sink.default["/kill"] = Reply(200, delay=0.01)
    subscribe(instances[0].url, f"{sink.url}/kill", config={"concurrency": "16"})
    accepted: list[str] = []
    stop = threading.Event()
    counter = itertools.count()

    def produce(worker: int) -> None:
        clients = [httpx.Client(base_url=i.url, timeout=5) for i in instances]
        for n in itertools.count():
            if stop.is_set():
                break
            client = clients[(worker + n) % len(clients)]
            batch = [event(next(counter)) for _ in range(5)]
            try:
                answer = client.post("/events", content=json.dumps(batch), headers=BATCH)
            except httpx.HTTPError:
                continue  # the killed instance: not acknowledged
            assert answer.status_code in (202, 503), answer.text
            if answer.status_code == 202:
                accepted.extend(e["id"] for e in batch)
        for client in clients:
            client.close()

    producers = [threading.Thread(target=produce, args=(w,)) for w in range(3)]
    for producer in producers:
        producer.start()
    wait_until(lambda: len(accepted) > 300 and len(sink.at("/kill")) > 50, timeout=60)
    instances[1].kill()
    wait_until(lambda: len(accepted) > 900, timeout=60)
    stop.set()
    for producer in producers:
        producer.join()
    wait_until(lambda: set(accepted) <= set(sink.ids("/kill")), timeout=60)
    counts = collections.Counter(sink.ids("/kill"))
    twice = sum(1 for n in counts.values() if n > 1)
    print(f"\n{len(accepted)} events accepted, {len(counts)} delivered, {twice} delivered twice")
    assert twice <= 16  # at most the killed instance's claims: the subscription's concurrency


def test_deleting_on_one_instance_stops_deliveries_from_all(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    sid = subscribe(a.url, f"{sink.url}/gone")
    marker = subscribe(a.url, f"{sink.url}/marker")
    assert httpx.delete(f"{b.url}/subscriptions/{sid}").status_code == 200
    for n, instance in enumerate([a, b, a, b]):
        httpx.post(
            f"{instance.url}/events", json=event(n), headers={"content-type": "application/cloudevents+json"}
        )
    sink.wait("/marker", 4)  # the same events reached the subscription that is still there
    assert sink.at("/gone") == []
    assert httpx.delete(f"{a.url}/subscriptions/{marker}").status_code == 200


def test_concurrency_and_rate_limit_hold_over_two_instances(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    sink.default["/slow"] = Reply(200, delay=0.1)
    slow = subscribe(a.url, f"{sink.url}/slow", config={"concurrency": "3"})

    def post_to_both(first: int) -> None:
        for instance, start_at in ((a, first), (b, first + 30)):
            batch = [event(n) for n in range(start_at, start_at + 30)]
            answer = httpx.post(f"{instance.url}/events", content=json.dumps(batch), headers=BATCH)
            assert answer.status_code == 202

    post_to_both(0)
    sink.wait("/slow", 60, timeout=30)
    assert 2 <= sink.max_inflight <= 3  # both instances deliver, never more than 3 at once
    assert httpx.delete(f"{b.url}/subscriptions/{slow}").status_code == 200
    subscribe(b.url, f"{sink.url}/rated", config={"ratelimit": "20"})
    post_to_both(100)
    rated = sink.wait("/rated", 60, timeout=30)
    assert len(rated) == 60
    # 60 deliveries at 20/s with a burst of 20 take at least two seconds, whichever instance sends.
    stamps = sorted(r.at for r in rated)
    assert stamps[-1] - stamps[0] >= 1.8


def test_a_database_restart_under_load_loses_nothing_and_heals(
    server_factory: Callable[..., PostgresServer], start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    server = server_factory(PostgresServer)
    db = server.create_database()
    a, b = start(db), start(db)
    subscribe(a.url, f"{sink.url}/restart")
    accepted: list[str] = []
    statuses: collections.Counter[int] = collections.Counter()
    stop = threading.Event()
    counter = itertools.count()

    def produce(instance: BrokerProcess) -> None:
        with httpx.Client(base_url=instance.url, timeout=10) as client:
            while not stop.is_set():
                batch = [event(next(counter)) for _ in range(5)]
                answer = client.post("/events", content=json.dumps(batch), headers=BATCH)
                statuses[answer.status_code] += 1
                if answer.status_code == 202:
                    accepted.extend(e["id"] for e in batch)
                elif answer.status_code == 503:
                    assert answer.headers.get("retry-after")
                    time.sleep(0.05)

    producers = [threading.Thread(target=produce, args=(i,)) for i in (a, b)]
    for producer in producers:
        producer.start()
    wait_until(lambda: len(accepted) > 200, timeout=30)
    server.stop()
    wait_until(lambda: statuses[503] > 5, timeout=30)
    server.start()
    before = len(accepted)
    wait_until(lambda: len(accepted) > before + 200, timeout=60)
    stop.set()
    for producer in producers:
        producer.join()
    assert set(statuses) <= {202, 503}, statuses
    for instance in (a, b):
        instance.ready(timeout=30)
    wait_until(lambda: set(accepted) <= set(sink.ids("/restart")), timeout=60)


def test_a_definition_written_on_one_instance_is_enforced_by_the_others(
    postgres_url: str, start: Callable[..., BrokerProcess]
) -> None:
    a = start(postgres_url, "--event-validation", "enforce")
    b = start(postgres_url, "--event-validation", "enforce")
    numbers = itertools.count()

    def post(instance: BrokerProcess, source: str) -> int:
        ping = event(next(numbers), type="com.example.ping", source=source)
        answer = httpx.post(f"{instance.url}/events", json=ping, headers=STRUCTURED)
        return answer.status_code

    assert post(b, "/ping") == 202  # no definition yet
    definition = {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"source": {"type": "uritemplate", "value": "/pong/{x}"}},
    }
    written = httpx.put(f"{a.url}/messagegroups/g/messages/com.example.ping", json=definition)
    assert written.status_code in (200, 201), written.text
    # b follows a's write: such an event is refused there too (after the notification's delay)
    wait_until(lambda: post(b, "/ping") == 400)
    assert post(b, "/pong/1") == 202
    # and a deletion on b lifts the definition on a
    assert httpx.delete(f"{b.url}/messagegroups/g").status_code in (200, 204)
    wait_until(lambda: post(a, "/ping") == 202)


def test_an_instance_away_longer_than_the_change_log_compares_every_subscription(
    postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    changed = subscribe(a.url, f"{sink.url}/changed", types=["t.before"])
    deleted = subscribe(a.url, f"{sink.url}/deleted", types=["t.away"])
    os.kill(b.pid, signal.SIGSTOP)  # b is away: it hears of nothing
    try:
        replaced = httpx.put(
            f"{a.url}/subscriptions/{changed}",
            json={"protocol": "HTTP", "sink": f"{sink.url}/changed", "types": ["t.away"]},
        )
        assert replaced.status_code == 200, replaced.text
        assert httpx.delete(f"{a.url}/subscriptions/{deleted}").status_code == 200
        subscribe(a.url, f"{sink.url}/added", types=["t.away"])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            # what the hourly purge does to changes older than an hour
            assert conn.execute("DELETE FROM subscription_changes").rowcount == 3 + 2
    finally:
        os.kill(b.pid, signal.SIGCONT)
    # The first event b takes after its return is matched against every change made meanwhile:
    # the versions it finds cannot be read as changes any more, so it compares every subscription.
    sent = httpx.post(f"{b.url}/events", json={**event(1), "type": "t.away"}, headers=STRUCTURED)
    assert sent.status_code == 202
    sink.wait("/changed", 1)
    sink.wait("/added", 1)
    assert sink.at("/deleted") == []
