"""A hung and a restarted PostgreSQL under load, two ``cebroker serve`` instances (issue 30,
findings 8 and 10).

* **Hung** (SIGSTOP on the server's postmaster and every process it started): every publish
  sent during the freeze is answered 503 with ``Retry-After`` within about two seconds (none
  waits for the thaw), ``/readyz`` turns 503 within a second on both instances, and after the
  thaw every event answered 202 is delivered.
* **Restarted** (a fast shutdown, an outage longer than the instance lease, a start): the
  deliveries sent twice are at most those in flight at the stop. Each instance records the
  confirmations that failed while the database was away when it returns, and reaps nobody
  until it has been back for a lease.

Both print their figures (``-s``).
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from servers.postgres import PostgresServer
from support.broker import BrokerProcess, BrokerProcesses
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BATCH = {"content-type": "application/cloudevents-batch+json"}
#: Seconds the database stays frozen.
FROZEN = 5.0
#: Seconds between two looks at /readyz.
POLL = 0.02
#: The subscription's concurrency: what may be in flight at once over every instance.
CONCURRENCY = 4


@pytest.fixture
def start(broker_processes: BrokerProcesses) -> Callable[..., BrokerProcess]:
    """``start(db)``: a ready ``cebroker serve`` on the PostgreSQL URL ``db`` with a short lease."""
    logs = itertools.count()

    def launch(db: str) -> BrokerProcess:
        flags = ("--webhook-validation", "off", "--instance-lease", "2s", "--log-level", "warning")
        return broker_processes(db, f"broker-{next(logs)}.log", *flags).start().ready()

    return launch


@dataclass(frozen=True)
class Answer:
    """One publish: when it was sent and answered (monotonic), its status and Retry-After."""

    sent: float
    answered: float
    status: int
    retry_after: str | None


class Load:
    """Producers posting batches of five events to each instance until stopped."""

    def __init__(self, instances: list[BrokerProcess]) -> None:
        self.accepted: list[str] = []
        self.answers: list[Answer] = []
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, args=(i,)) for i in instances]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _produce(self, instance: BrokerProcess) -> None:
        with httpx.Client(base_url=instance.url, timeout=30) as client:
            while not self._stop.is_set():
                with self._lock:
                    batch = [event(next(self._numbers)) for _ in range(5)]
                sent = time.monotonic()
                answer = client.post("/events", content=json.dumps(batch), headers=BATCH)
                with self._lock:
                    self.answers.append(
                        Answer(sent, time.monotonic(), answer.status_code, answer.headers.get("retry-after"))
                    )
                    if answer.status_code == 202:
                        self.accepted.extend(e["id"] for e in batch)
                if answer.status_code != 202:
                    time.sleep(0.05)


class Readiness:
    """Looks at each instance's /readyz every :data:`POLL` seconds; keeps (answered, status)."""

    def __init__(self, instances: list[BrokerProcess]) -> None:
        self.seen: dict[str, list[tuple[float, int]]] = {i.url: [] for i in instances}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll, args=(i,)) for i in instances]

    def __enter__(self) -> Readiness:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _poll(self, instance: BrokerProcess) -> None:
        with httpx.Client(base_url=instance.url, timeout=10) as client:
            while not self._stop.is_set():
                status = client.get("/readyz").status_code
                self.seen[instance.url].append((time.monotonic(), status))
                time.sleep(POLL)

    def unready_after(self, url: str, since: float) -> float | None:
        """Seconds from ``since`` to the first 503 of ``url`` answered after it."""
        return next((at - since for at, status in self.seen[url] if at > since and status == 503), None)


def subscribe(url: str, sink: str) -> str:
    body = {"protocol": "HTTP", "sink": sink, "config": {"concurrency": str(CONCURRENCY)}}
    response = httpx.post(f"{url}/subscriptions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.mark.alone  # answers bounded to 2 s and readiness to 1 s on the wall clock
def test_a_hung_database_is_503_within_two_seconds_and_loses_nothing_accepted(
    server_factory: Callable[..., PostgresServer], start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    server = server_factory(PostgresServer)
    db = server.create_database()
    instances = [start(db), start(db)]
    subscribe(instances[0].url, f"{sink.url}/hung")
    with Readiness(instances) as readiness, Load(instances) as load:
        wait_until(lambda: len(load.accepted) > 300, timeout=30)
        pids = server.freeze()
        frozen = time.monotonic()
        try:
            wait_until(lambda: all(readiness.unready_after(i.url, frozen) for i in instances), timeout=10)
            # keep it frozen for a while: requests keep coming
            wait_until(lambda: time.monotonic() > frozen + FROZEN, timeout=FROZEN + 1)
        finally:
            server.thaw(pids)
        thawed = time.monotonic()
        before = len(load.accepted)
        wait_until(lambda: len(load.accepted) > before + 300, timeout=60)
    during = [a for a in load.answers if frozen + 0.01 < a.sent and a.answered < thawed]
    waits = sorted(a.answered - a.sent for a in during)
    unready = [readiness.unready_after(i.url, frozen) for i in instances]
    statuses = sorted({a.status for a in during})
    caught = [a.answered - frozen for a in load.answers if a.sent <= frozen < a.answered]
    print(
        f"\nhung database: {len(during)} publishes during the freeze, all {statuses};"
        f" answered in at most {waits[-1]:.2f} s (median {waits[len(waits) // 2]:.3f} s);"
        f" those in flight at the freeze answered {max(caught, default=0.0):.2f} s after it;"
        f" /readyz 503 after {', '.join(f'{u:.2f} s' for u in unready if u is not None)}"
    )
    assert len(during) > 20  # requests did arrive during the freeze
    assert {a.status for a in during} == {503}
    assert all(a.retry_after for a in during)
    assert waits[-1] <= 2.0
    # the requests in flight at the freeze did not wait for the thaw either
    assert all(a.answered < frozen + 2.0 or a.sent > frozen for a in load.answers if a.sent <= frozen)
    assert all(u is not None and u <= 1.0 for u in unready), unready
    assert {a.status for a in load.answers} <= {202, 503}
    wait_until(lambda: set(load.accepted) <= set(sink.ids("/hung")), timeout=60)


def test_after_a_database_restart_only_what_was_in_flight_comes_twice(
    server_factory: Callable[..., PostgresServer], start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    server = server_factory(PostgresServer)
    db = server.create_database()
    instances = [start(db), start(db)]
    subscription = subscribe(instances[0].url, f"{sink.url}/restart")
    sink.default["/restart"] = Reply(200, delay=0.02)  # deliveries are in flight at the stop
    with Load(instances) as load:
        wait_until(lambda: len(load.accepted) > 300, timeout=30)
        server.stop()
        stopped = time.monotonic()
        # away for longer than the lease: every heartbeat is stale when it returns
        wait_until(lambda: time.monotonic() > stopped + 4.0, timeout=5)
        server.start()
        before = len(load.accepted)
        wait_until(lambda: len(load.accepted) > before + 300, timeout=60)
    wait_until(lambda: set(load.accepted) <= set(sink.ids("/restart")), timeout=60)

    def pending() -> int:
        status = httpx.get(f"{instances[0].url}/subscriptions/{subscription}/status").json()
        return int(status["pending"])

    wait_until(lambda: pending() == 0, timeout=60)  # nothing left that could be sent again
    received = sink.ids("/restart")
    twice = collections.Counter(received)
    duplicates = sum(n - 1 for n in twice.values())
    print(
        f"\ndatabase restart: {len(set(received))} events delivered, {duplicates} sent twice"
        f" (in flight at most {CONCURRENCY})"
    )
    assert duplicates <= CONCURRENCY
