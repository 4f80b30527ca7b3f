"""Spark into the broker: events/s of a Spark job next to the broker's own batch-ingest rate.

Each measurement gets a fresh ``cebroker serve`` process and SQLite file with one subscription
whose deliveries are rate-limited, so that delivery does not compete for the CPU (as in
``bench_ingress.py``); every event still gets its delivery row. Each round measures:

1. plain: a client posting the same kind of events, pre-encoded, in batches of ``--batch-size``
   over as many keep-alive connections as the Spark job has requests in flight
   (``--partitions`` x ``--in-flight``): the broker's batch-ingest rate;
2. spark: a ``spark-feed``-style query (parquet files -> ``cloudevents`` sink, available-now
   trigger, ``local[<partitions>]``), timed from start to termination, so Spark's planning,
   reading, Arrow transfer, row conversion, validation and JSON encoding are all included.

A first, untimed query of 10,000 rows starts Spark's Python workers (a long-running feed pays
this once; its time is printed). Rounds alternate so that background load on the machine falls
on both. Prints each round, the medians and the median ratio (target >= 0.8). Usage:
``python benchmarks/spark_bench.py [--events 200000] [--partitions 2] [--batch-size 1000]
[--in-flight 2] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
BATCH = {"Content-Type": "application/cloudevents-batch+json"}
PAYLOAD = "x" * 100
#: Rows of the untimed first query: it pays for starting the Python workers and warming the JVM,
#: which a long-running feed pays once.
WARMUP = 10_000


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``cebroker serve`` on a free port with ``db``; returns the process and its base URL."""
    port = free_port()
    args = ["-m", "cebroker", "serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    proc = subprocess.Popen(
        [sys.executable, *args, "--webhook-validation", "off"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start")


@contextlib.contextmanager
def running_broker(db: Path) -> Iterator[str]:
    """A broker with one subscription (deliveries rate-limited to 1/s, so they do not compete
    for the CPU; the events still get their delivery rows)."""
    proc, url = start_broker(db)
    try:
        sub = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/none", "config": {"ratelimit": "1"}}
        created = httpx.post(f"{url}/subscriptions", json=sub, timeout=10)
        if created.status_code != 201:
            raise RuntimeError(f"subscription refused: {created.text}")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def event(n: int, run: str) -> dict[str, object]:
    """One event of the plain client, shaped like the rows of the Spark input."""
    return {
        "specversion": "1.0",
        "id": f"{run}-{n}",
        "source": "/bench",
        "type": "com.example.bench",
        "time": "2024-05-01T10:00:00Z",
        "data": {"n": n, "payload": PAYLOAD},
    }


def baseline(url: str, events: int, batch: int, connections: int) -> float:
    """Events/s of pre-encoded batches posted over ``connections`` keep-alive connections."""
    bodies = [
        json.dumps([event(start + k, "plain") for k in range(min(batch, events - start))]).encode()
        for start in range(0, events, batch)
    ]
    failures: list[str] = []

    def worker(mine: list[bytes]) -> None:
        with httpx.Client(headers=BATCH, timeout=60) as client:
            for body in mine:
                response = client.post(f"{url}/events", content=body)
                if response.status_code != 202:
                    failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=worker, args=(bodies[i::connections],)) for i in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"baseline: {len(failures)} batches refused, first: {failures[0]}")
    return events / elapsed


def write_input(spark: SparkSession, directory: Path, run: str, events: int, partitions: int) -> None:
    """Parquet files of ``events`` rows shaped like the baseline's events."""
    from pyspark.sql import functions as F

    (
        spark.range(0, events, numPartitions=partitions)
        .select(
            F.concat(F.lit(f"{run}-"), F.col("id").cast("string")).alias("id"),
            F.lit("/bench").alias("source"),
            F.lit("com.example.bench").alias("type"),
            F.lit("2024-05-01T10:00:00Z").alias("time"),
            F.struct(F.col("id").alias("n"), F.lit(PAYLOAD).alias("payload")).alias("data"),
        )
        .write.parquet(str(directory))
    )


def run_query(
    spark: SparkSession, directory: Path, url: str, batch: int, in_flight: int, checkpoint: Path
) -> tuple[float, list[dict[str, Any]]]:
    """Seconds from start to termination of an available-now query over ``directory``."""
    schema = spark.read.parquet(str(directory)).schema
    started = time.perf_counter()
    query = (
        spark.readStream.schema(schema)
        .parquet(str(directory))
        .writeStream.format("cloudevents")
        .option("url", f"{url}/events")
        .option("batchSize", batch)
        .option("maxInFlight", in_flight)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started, [dict(p) for p in query.recentProgress]


def main() -> None:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=2, help="requests in flight per partition")
    parser.add_argument("--repeat", type=int, default=3, help="alternating plain/Spark rounds")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from cebroker.spark.feed import build_session

    connections = args.partitions * args.in_flight
    rounds: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spark = build_session(f"local[{args.partitions}]", app_name="cebroker-spark-bench")
        write_input(spark, work / "warmup", "warm", WARMUP, args.partitions)
        write_input(spark, work / "in", "spark", args.events, args.partitions)
        with running_broker(work / "warmup.db") as url:
            cold, _ = run_query(spark, work / "warmup", url, args.batch_size, args.in_flight, work / "ck-w")
        # Every measurement gets a fresh broker and database, so none pays for another's rows;
        # alternating the two spreads the machine's background load over both.
        for n in range(args.repeat):
            with running_broker(work / f"plain{n}.db") as url:
                plain = baseline(url, args.events, args.batch_size, connections)
            with running_broker(work / f"spark{n}.db") as url:
                elapsed, progress = run_query(
                    spark, work / "in", url, args.batch_size, args.in_flight, work / f"ck{n}"
                )
            rows = sum(int(p["numInputRows"]) for p in progress)
            if rows != args.events:
                raise RuntimeError(f"the query read {rows} rows, expected {args.events}")
            rounds.append((plain, args.events / elapsed))
            print(f"   round {n + 1}: plain {plain:9,.0f} ev/s   spark {args.events / elapsed:9,.0f} ev/s")
        spark.stop()

    plain = statistics.median(r[0] for r in rounds)
    spark_rate = statistics.median(r[1] for r in rounds)
    ratio = statistics.median(r[1] / r[0] for r in rounds)
    print(
        f"Spark -> broker: {args.events:,} events, batches of {args.batch_size}, {args.partitions} "
        f"partitions x {args.in_flight} in flight; plain client with {connections} connections"
    )
    print(f"   broker batch ingest, plain client (median) : {plain:9,.0f} ev/s")
    print(f"   Spark job, cloudevents sink (median)       : {spark_rate:9,.0f} ev/s")
    print(f"   ratio spark / plain (median of rounds)      : {ratio:9.2f}   (target >= 0.8)")
    print(f"   absolute target 50,000 ev/s                 : {'met' if spark_rate >= 50_000 else 'NOT met'}")
    print(f"   cold first query ({WARMUP:,} rows, Python worker start; not in the rates): {cold:.1f} s")


if __name__ == "__main__":
    main()
