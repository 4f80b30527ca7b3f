"""PostgreSQL benchmark 4: how long a killed instance's deliveries wait before another instance
takes them over and delivers them, from the moment its lease expires; median and max over
several kills.

Two ``cebroker serve`` instances share one database; events are posted at a steady rate to the
survivor, and both claim and deliver them to a sink that answers after 200 ms (so that each
instance always holds claims in flight). The other instance is then SIGKILLed. Its last
heartbeat (the database's ``broker_instances``) plus ``--lease`` is when its lease expires; the
deliveries it had claimed (read from the database right after the kill) are then taken over by
the survivor. Per kill: the time from the expiry to the first and to the last of those
deliveries reaching the sink (its arrival times by event id). The victim is started again for
the next kill. The baseline is the lease itself: the kill-to-delivery time is printed beside it.
Usage: ``python benchmarks/bench_pg_takeover.py [--kills 5] [--lease 5] [--rate 200]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import httpx
import psycopg
from harness import Child, broker, sink
from pg import postgres, uptime

BATCH = {"content-type": "application/cloudevents-batch+json"}


def _produce(target: Child, rate: float, stop: threading.Event) -> None:
    """Post ``rate`` events/s to ``target`` in batches of ten until ``stop``."""
    n = 0
    with httpx.Client(base_url=target.url, timeout=10) as client:
        started = time.monotonic()
        while not stop.is_set():
            batch = [
                {"specversion": "1.0", "id": f"k-{n + k}", "source": "/bench", "type": "t"} for k in range(10)
            ]
            n += 10
            answer = client.post("/events", content=json.dumps(batch), headers=BATCH)
            assert answer.status_code == 202, answer.text
            delay = started + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def _claims_of(url: str, pid: int) -> tuple[float, list[str]]:
    """The killed instance's last heartbeat (epoch seconds) and the events of its claims."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT id, extract(epoch FROM heartbeat) FROM broker_instances WHERE pid = %s", (pid,)
        ).fetchone()
        if row is None:
            raise RuntimeError("the killed instance has no row")
        bodies = conn.execute(
            "SELECT e.body FROM pipeline_deliveries d JOIN pipeline_events e ON e.seq = d.event_seq"
            " WHERE d.owner = %s",
            (row[0],),
        ).fetchall()
    return float(row[1]), [str(json.loads(b)["id"]) for (b,) in bodies]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lease", type=float, default=5.0, help="seconds (--instance-lease)")
    parser.add_argument("--rate", type=float, default=200.0, help="events/s posted")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    lease = f"{args.lease:g}s"
    rows: list[tuple[int, float, float, float]] = []
    with postgres() as server:
        url = server.create_database()
        target = sink()
        survivor = broker(url, webhook_validation="off", instance_lease=lease)
        stop = threading.Event()
        producer: threading.Thread | None = None
        try:
            sub = {"protocol": "HTTP", "sink": f"{target.url}/slow/track/t", "config": {"concurrency": "64"}}
            assert httpx.post(survivor.url + "/subscriptions", json=sub).status_code == 201
            producer = threading.Thread(target=_produce, args=(survivor, args.rate, stop), daemon=True)
            producer.start()
            for _ in range(args.kills):
                victim = broker(url, webhook_validation="off", instance_lease=lease)
                time.sleep(2.0)  # it claims and delivers its share meanwhile
                victim.proc.kill()
                killed = time.time()
                victim.proc.wait()
                heartbeat, claimed = _claims_of(url, victim.proc.pid)
                expiry = heartbeat + args.lease
                deadline = time.monotonic() + args.lease + 60
                while True:
                    arrivals = httpx.get(target.url + "/arrivals").json()
                    after = [
                        min((t for t in arrivals.get(i, []) if t > killed), default=None) for i in claimed
                    ]
                    if all(t is not None for t in after):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("the killed instance's deliveries were not taken over")
                    time.sleep(0.05)
                times = [t for t in after if t is not None]
                rows.append((len(claimed), min(times) - expiry, max(times) - expiry, min(times) - killed))
        finally:
            stop.set()
            if producer is not None:
                producer.join()
            survivor.stop()
            target.stop()
    print(f"load after:  {uptime()}")
    print(
        f"4. take-over of a killed instance's deliveries, lease {lease}, {args.kills} kills,"
        f" {args.rate:.0f} events/s, sink answering in 200 ms"
    )
    for n, (claims, first, last, from_kill) in enumerate(rows, start=1):
        print(
            f"   kill {n}: {claims:3d} claims; lease expiry -> first delivery {first * 1e3:6.0f} ms,"
            f" -> last {last * 1e3:6.0f} ms; kill -> first delivery {from_kill:.2f} s"
        )
    firsts = [r[1] for r in rows]
    lasts = [r[2] for r in rows]
    print(
        f"   expiry -> first delivery: median {statistics.median(firsts) * 1e3:.0f} ms,"
        f" max {max(firsts) * 1e3:.0f} ms; -> last: median {statistics.median(lasts) * 1e3:.0f} ms,"
        f" max {max(lasts) * 1e3:.0f} ms (baseline: the lease, {args.lease:g} s, waited before)"
    )


if __name__ == "__main__":
    main()
