"""Graceful shutdown: SIGTERM to one of two ``cebroker serve`` instances on one PostgreSQL database
while events are delivered to a slow sink.

The stopped instance turns not ready, stops accepting, lets its deliveries in flight finish
(``--shutdown-grace``), cancels those that outlast the grace and frees every delivery it still
holds, so the other instance takes them at once: the backlog is done long before the instance
lease (60 s here) would have freed them. Every event accepted (``202``) is delivered; duplicates
are counted and bounded by the deliveries in flight when the signal came.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from support.broker import BrokerProcess, BrokerProcesses
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BATCH = {"content-type": "application/cloudevents-batch+json"}
LEASE = 60.0
CONCURRENCY = 8


@pytest.fixture
def start(broker_processes: BrokerProcesses) -> Callable[..., BrokerProcess]:
    logs = itertools.count()

    def launch(db: str, grace: float) -> BrokerProcess:
        flags = (
            "--webhook-validation",
            "off",
            "--instance-lease",
            f"{LEASE:g}s",
            "--shutdown-grace",
            f"{grace:g}s",
            "--log-level",
            "warning",
        )
        return broker_processes(db, f"broker-{next(logs)}.log", *flags).start().ready()

    return launch


@pytest.mark.alone  # the stop bounded to the grace plus 3 s, the hand-over to 30 s, on the wall clock
@pytest.mark.parametrize(
    ("delay", "grace"),
    [
        pytest.param(1.0, 5.0, id="in-flight-finish-within-the-grace"),
        pytest.param(4.0, 1.0, id="in-flight-outlast-the-grace"),
    ],
)
def test_sigterm_finishes_in_flight_and_hands_the_rest_over_at_once(
    delay: float, grace: float, postgres_url: str, start: Callable[..., BrokerProcess], sink: Sink
) -> None:
    """Each delivery takes ``delay`` at the sink; the stopped instance has ``grace``. Deliveries
    that outlast the grace are cancelled and handed over: they may come twice, no more of them
    than were in flight."""
    first, second = start(postgres_url, grace), start(postgres_url, grace)
    sink.default["/slow"] = Reply(200, delay=delay)
    created = httpx.post(
        f"{first.url}/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/slow", "config": {"concurrency": str(CONCURRENCY)}},
    )
    assert created.status_code == 201, created.text
    accepted: list[str] = []
    counter = itertools.count()
    stop = threading.Event()

    def produce() -> None:
        """Batches of 5 to each instance in turn until told to stop (a refused or unanswered
        post is not acknowledged, so not counted)."""
        clients = [httpx.Client(base_url=b.url, timeout=5) for b in (first, second)]
        for n in itertools.count():
            if stop.is_set():
                break
            batch = [event(next(counter)) for _ in range(5)]
            try:
                answer = clients[n % 2].post("/events", content=json.dumps(batch), headers=BATCH)
            except httpx.HTTPError:
                continue
            if answer.status_code == 202:
                accepted.extend(e["id"] for e in batch)
            time.sleep(delay / 2)  # 10 events per delay: a little more than the sink takes (8)
        for client in clients:
            client.close()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        # Both instances busy: each with its share of the concurrency in flight.
        wait_until(lambda: sink.inflight >= CONCURRENCY and len(sink.at("/slow")) >= CONCURRENCY, timeout=60)
        in_flight = sink.inflight
        signalled = time.monotonic()
        assert first.proc is not None
        first.proc.send_signal(signal.SIGTERM)
        ready_after_signal = []

        def ended() -> bool:
            with contextlib.suppress(httpx.TransportError):  # no longer accepting
                ready_after_signal.append(httpx.get(f"{first.url}/readyz", timeout=1).status_code)
            return not first.running

        wait_until(ended, timeout=grace + 10, message="the first instance to exit", interval=0.05)
        stopped = time.monotonic() - signalled
        time.sleep(0.5)  # events keep coming to the second instance for a while
    finally:
        stop.set()
        producer.join()
    # uvicorn raises the signal again once its shutdown is complete.
    assert first.exit_code(timeout=1) in (0, -signal.SIGTERM), first.log_text()
    assert 200 not in ready_after_signal
    started_waiting = time.monotonic()
    wait_until(lambda: set(accepted) <= set(sink.ids("/slow")), timeout=LEASE + 30)
    finished = time.monotonic() - started_waiting
    counts = collections.Counter(sink.ids("/slow"))
    twice = sum(n - 1 for n in counts.values() if n > 1)
    print(
        f"\n{len(accepted)} accepted, {len(counts)} delivered, {twice} duplicates; {in_flight} in flight at"
        f" SIGTERM; the instance stopped in {stopped:.2f} s; the rest delivered {finished:.2f} s later"
    )
    assert stopped < grace + 3
    # Taken over at once: the backlog is done long before the stopped instance's lease ends.
    assert finished < LEASE / 2
    assert twice <= in_flight
    if delay < grace:  # the deliveries in flight at the signal finished: none came twice
        assert twice == 0
    else:  # they were cancelled at the end of the grace, before they could finish
        assert grace <= stopped < delay
