"""JSON-lines files streamed by a real local SparkSession into a running broker, checked at a real
HTTP sink subscribed to everything (structured-mode deliveries).

Checks the issue's guarantees: every valid row delivered exactly once by ``(source, id)``, with
attributes and data intact (CloudEvents 1.0 core attributes, JSON event format ``data``);
malformed and invalid rows in the error location with their reason; a replayed micro-batch
de-duplicated by the broker.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from spark.conftest import LiveBroker
from spark.proxy import RefusingProxy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORDERS = 100
TICKS = 150
CUSTOM = 20
VALID = ORDERS + TICKS + CUSTOM


def order(i: int) -> dict[str, Any]:
    return {
        "id": f"order-{i}",
        "type": "com.example.order",
        "subject": f"orders/{i}",
        "time": f"2024-05-01T10:00:{i % 60:02d}Z",
        "data": {"amount": i + 0.5, "items": ["a", str(i)]},
        "tenant": "acme",
        "priority": i,
    }


def write_inputs(directory: Path) -> None:
    """Three files, read in this order (one micro-batch each): orders with ids; valid rows from
    another source mixed with a malformed line and three invalid rows; ticks without id or source."""
    directory.mkdir()
    lines_a = [json.dumps(order(i)) for i in range(ORDERS)]
    lines_b = [json.dumps({"type": "com.example.tick", "data": {"seq": i}}) for i in range(TICKS)]
    lines_c = [
        json.dumps({"id": f"late-{i}", "source": "/custom", "type": "com.example.late"})
        for i in range(CUSTOM)
    ]
    lines_c[5:5] = [
        '{"id": "cut-short", "type": "com.example.order", ',
        json.dumps({"id": "bad-time", "type": "com.example.order", "time": "yesterday"}),
        json.dumps({"id": "no-type", "subject": "s"}),
        json.dumps({"id": "too-big", "type": "com.example.order", "priority": 3_000_000_000}),
    ]
    for age, (name, lines) in enumerate((("a.json", lines_a), ("c.json", lines_c), ("b.json", lines_b))):
        path = directory / name
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + age, 1_700_000_000 + age))  # the file source reads oldest first


def start(spark: SparkSession, inputs: Path, checkpoint: Path, url: str, **options: str) -> StreamingQuery:
    schema = spark.read.json(str(inputs)).schema
    return (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .writeStream.format("cloudevents")
        .option("url", url)
        .option("source", "/spark-test")
        .option("batchSize", 25)
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
    )


def rejected_records(error_path: Path) -> dict[str, dict[str, Any]]:
    records = [
        json.loads(line) for f in error_path.rglob("part-*.jsonl") for line in f.read_text().splitlines()
    ]
    return {str(r["row"].get("id") or r["row"].get("_corrupt_record")): r for r in records}


def assert_exactly_once(events: list[dict[str, Any]]) -> None:
    counts = Counter((e["source"], e["id"]) for e in events)
    duplicated = {key: n for key, n in counts.items() if n > 1}
    assert not duplicated, f"delivered more than once: {list(duplicated)[:5]}"
    assert len(counts) == VALID, f"expected {VALID} distinct events, got {len(counts)}"
    by_id = {e["id"]: e for e in events}
    for i in (0, 7, ORDERS - 1):
        assert by_id[f"order-{i}"] == {"specversion": "1.0", "source": "/spark-test", **order(i)}
    ticks = [e for e in events if e["type"] == "com.example.tick"]
    assert sorted(e["data"]["seq"] for e in ticks) == list(range(TICKS))
    assert {e["source"] for e in ticks} == {"/spark-test"}
    assert {e["id"] for e in events if e["source"] == "/custom"} == {f"late-{i}" for i in range(CUSTOM)}


def test_files_reach_the_sink_exactly_once_and_a_replayed_batch_is_deduplicated(
    spark: SparkSession, broker: LiveBroker, proxy: tuple[RefusingProxy, str], tmp_path: Path
) -> None:
    """Every valid row arrives once with its attributes and data; invalid rows are in the error
    location with reasons; replaying the last micro-batch (its commit removed, as after a driver
    crash between sending and committing) delivers nothing twice."""
    inputs, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    write_inputs(inputs)
    start(spark, inputs, checkpoint, broker.events_url).awaitTermination(120)
    events = broker.delivered(VALID)
    assert_exactly_once(events)

    rejected = rejected_records(checkpoint / "errors")
    assert set(rejected) == {
        '{"id": "cut-short", "type": "com.example.order", ',
        "bad-time",
        "no-type",
        "too-big",
    }
    assert rejected["bad-time"]["pointer"] == "/time"
    assert "RFC 3339" in rejected["bad-time"]["reason"]
    assert rejected["no-type"]["pointer"] == "/type"
    assert rejected["too-big"]["pointer"] == "/priority"
    assert "malformed" in rejected['{"id": "cut-short", "type": "com.example.order", ']["reason"]

    commits = sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert commits == ["0", "1", "2"]  # one micro-batch per file
    for name in ("2", ".2.crc"):  # batch 2 (the ticks, generated ids) runs again
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    counter, counted_url = proxy  # never refuses here: it only counts what the replay sends
    start(spark, inputs, checkpoint, counted_url).awaitTermination(120)
    assert (checkpoint / "commits" / "2").exists()
    assert counter.forwarded_events == TICKS
    (summary,) = (checkpoint / "errors").glob("query-*/batch-2/_summary.json")
    assert json.loads(summary.read_text())["duplicates"] == TICKS  # the broker said: already have them
    assert_exactly_once(broker.delivered(VALID))
