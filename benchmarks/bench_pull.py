"""Pull delivery against push delivery of the same events, in the same run.

Two brokers (``cebroker serve`` on fresh SQLite files), the same N events published to each in
batches of 500 by this process:

* **push**: an HTTP subscription delivers them to the counting sink (``benchmarks/sink.py``);
  timed from the first publish until the sink has counted N.
* **pull**: one consumer, running while the events are published, receives them in batches of
  100 (``receive?max=100&wait=1``) and acknowledges each batch; timed from the first publish
  until N are acknowledged.

Prints events/s of both and the ratio pull/push (target >= 1.0), with the load average: the
machine may be shared, and other processes only ever slow a run down.
Usage: ``python benchmarks/bench_pull.py [--events 20000]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import httpx
from harness import broker, sink, sink_stats

BATCH = {"content-type": "application/cloudevents-batch+json"}
PUBLISH_BATCH = 500
RECEIVE_BATCH = 100


def _events(start: int, count: int) -> list[dict[str, object]]:
    return [
        {
            "specversion": "1.0",
            "id": f"b-{n}",
            "source": "/bench",
            "type": "com.example.bench",
            "datacontenttype": "application/json",
            "data": {"n": n, "payload": "x" * 100},
        }
        for n in range(start, start + count)
    ]


def _publish(client: httpx.Client, events: int) -> None:
    for start in range(0, events, PUBLISH_BATCH):
        r = client.post("/events", json=_events(start, min(PUBLISH_BATCH, events - start)), headers=BATCH)
        r.raise_for_status()


def push(db: Path, events: int) -> float:
    """Events/s delivered to the HTTP sink, from the first publish to the last arrival."""
    target = sink()
    child = broker(db, webhook_validation="off")  # the counting sink answers no handshake
    try:
        with httpx.Client(base_url=child.url, timeout=60) as client:
            sub = {"protocol": "HTTP", "sink": target.url + "/deliver", "config": {"concurrency": "32"}}
            client.post("/subscriptions", json=sub).raise_for_status()
            started = time.perf_counter()
            _publish(client, events)
            while sink_stats(target.url)["count"] < events:
                time.sleep(0.01)
            return events / (time.perf_counter() - started)
    finally:
        child.stop()
        target.stop()


def pull(db: Path, events: int) -> float:
    """Events/s received and acknowledged by one consumer in batches of 100."""
    child = broker(db)
    try:
        with httpx.Client(base_url=child.url, timeout=60) as client:
            sid = client.post("/subscriptions", json={"protocol": "PULL"}).json()["id"]
            done: list[int] = [0]

            def consume() -> None:
                with httpx.Client(base_url=child.url, timeout=60) as consumer:
                    while done[0] < events:
                        got = consumer.post(
                            f"/subscriptions/{sid}/receive", params={"max": RECEIVE_BATCH, "wait": 1}
                        ).json()["events"]
                        if not got:
                            continue
                        answer = consumer.post(
                            f"/subscriptions/{sid}/acknowledge",
                            json={"locktokens": [g["locktoken"] for g in got]},
                        ).json()
                        assert not answer["failed"], answer["failed"]
                        done[0] += len(answer["succeeded"])

            thread = threading.Thread(target=consume)
            started = time.perf_counter()
            thread.start()
            _publish(client, events)
            thread.join()
            return events / (time.perf_counter() - started)
    finally:
        child.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pushed = push(Path(tmp) / "push.db", args.events)
        pulled = pull(Path(tmp) / "pull.db", args.events)
    load = os.getloadavg()
    print(f"Pull delivery ({args.events} events; one broker process each, SQLite)")
    print(f"   push to an HTTP sink              : {pushed:9.0f} events/s")
    print(f"   pull, receive+ack in batches of {RECEIVE_BATCH}: {pulled:9.0f} events/s")
    print(f"   ratio pull/push                   : {pulled / pushed:9.2f}   (target >= 1.0)")
    print(
        f"   load average                      : {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared machine)"
    )


if __name__ == "__main__":
    main()
