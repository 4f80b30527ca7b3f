"""The storage seen from outside, with real ``cebroker serve`` processes: one broker per SQLite
file, and a disk that fills up under batch ingest and frees up again (a file size limit set on
the broker process, raised from outside while it runs)."""

from __future__ import annotations

import math
import resource
import signal
import time
from pathlib import Path

import httpx
import pytest
from support.broker import BrokerProcesses
from support.events import event
from support.sinks import Sink
from support.waiting import wait_until

BATCH = {"content-type": "application/cloudevents-batch+json"}
FLAGS = ("--webhook-validation", "off", "--log-level", "info")


def test_a_second_broker_on_the_same_file_exits_at_once(
    tmp_path: Path, broker_processes: BrokerProcesses
) -> None:
    db = tmp_path / "data" / "broker.db"
    first = broker_processes(db, "first.log", *FLAGS).start().ready()
    second = broker_processes(db, "second.log", *FLAGS).start()
    code = second.exit_code(timeout=30)
    text = second.log_text()
    assert code == 1, text
    assert f"the database {db} is in use by another broker (pid {first.pid} on" in text
    assert "since " in text
    assert "Traceback" not in text
    assert httpx.get(f"{first.url}/readyz").status_code == 200  # the first one is unharmed
    first.terminate()
    broker_processes(db, "third.log", *FLAGS).start().ready()  # the lock went with the first process


@pytest.mark.slow
def test_a_full_disk_is_503_and_recovers_by_itself(
    tmp_path: Path, broker_processes: BrokerProcesses, sink: Sink
) -> None:
    """Batch ingest into a broker whose files may not grow past 1 MiB (and whose sink holds every
    delivery, so nothing is freed): once commits fail, every answer is 503 with Retry-After
    (never a 500), readyz is not ready and names the cause, and the log has a warning and no
    traceback. When the limit is raised from outside, the broker is ready again without any
    request, and every event it answered 202 is delivered."""
    limit = 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    sink.hold()
    broker = broker_processes(tmp_path / "broker.db", "broker.log", *FLAGS, preexec=small_disk)
    broker.start().ready()
    http = httpx.Client(base_url=broker.url, timeout=30)
    sub = {"protocol": "HTTP", "sink": f"{sink.url}/hook", "config": {"concurrency": "4", "timeout": "300"}}
    assert http.post("/subscriptions", json=sub).status_code == 201
    accepted: set[str] = set()
    refused: list[httpx.Response] = []
    refused_since = math.inf
    deadline = time.monotonic() + 120
    n = 0
    # Until the refusals have lasted longer than a few recovery probes: space the checkpoint of
    # the write-ahead log frees may let a batch in now and then before the files are full.
    while time.monotonic() - refused_since < 3:
        assert time.monotonic() < deadline, f"still accepting after {n} batches"
        n += 1
        batch = [event(n * 1000 + k, data={"pad": "x" * 200}) for k in range(200)]
        r = http.post("/events", json=batch, headers=BATCH)
        assert r.status_code in (202, 503), r.text
        if r.status_code == 202:
            accepted |= {e["id"] for e in batch}
            refused_since = math.inf
        else:
            refused.append(r)
            refused_since = min(refused_since, time.monotonic())
    assert accepted, "nothing was accepted before the storage filled up"
    for r in refused:
        problem = r.json()
        assert r.headers["content-type"] == "application/problem+json"
        assert int(r.headers["retry-after"]) >= 1
        assert problem["type"] == "https://cebroker.dev/problems/store-unavailable"
        assert "disk full" in problem["detail"] or "I/O error" in problem["detail"], problem
    ready = http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["detail"] in ("storage unavailable: disk full", "storage unavailable: I/O error")

    resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (hard, hard))
    wait_until(lambda: http.get("/readyz").status_code == 200, timeout=30, message="readyz ready again")
    last = [event(10**6 + k) for k in range(10)]
    assert http.post("/events", json=last, headers=BATCH).status_code == 202
    accepted |= {e["id"] for e in last}
    sink.release()
    wait_until(
        lambda: accepted <= set(sink.ids("/hook")), timeout=120, message="every accepted event delivered"
    )
    http.close()
    broker.terminate()
    log = broker.log_text()
    assert "Traceback" not in log
    assert " 500 " not in log
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert warnings
    assert all("cebroker.storage" in w and "storage unavailable" in w for w in warnings), warnings
    assert "available again" in log
