"""``cebroker spark-feed --once`` and the batch writer, against the real broker and sink."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cebroker.cli import main
from spark.conftest import LiveBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_spark_feed_once_feeds_the_files_present_and_exits(
    spark: SparkSession, broker: LiveBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--once`` (available-now trigger) returns 0 when every row is in the broker; the schema is
    inferred, the source defaults to the input directory, a malformed line is counted as rejected
    and the console shows progress and a summary."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    rows = [json.dumps({"id": f"cli-{i}", "data": {"i": i}}) for i in range(60)]
    (inputs / "one.json").write_text("\n".join([*rows[:30], "not json at all", *rows[30:]]) + "\n")

    code = main(
        [
            "spark-feed",
            *("--input", str(inputs), "--format", "json", "--once"),
            *("--url", broker.events_url, "--master", "local[2]"),
            *("--checkpoint", str(tmp_path / "ck"), "--batch-size", "16", "--type", "com.example.cli"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    events = broker.delivered(60)
    assert sorted(e["id"] for e in events) == sorted(f"cli-{i}" for i in range(60))
    assert {e["source"] for e in events} == {f"file://{inputs.resolve()}"}
    assert {e["type"] for e in events} == {"com.example.cli"}
    assert "batch 0: 61 rows" in out
    assert "done: 61 rows in 1 batches" in out
    assert "1 rejected" in out
    rejected = [
        json.loads(line)
        for f in (tmp_path / "ck" / "errors").rglob("*.jsonl")
        for line in f.read_text().splitlines()
    ]
    assert [r["row"]["_corrupt_record"] for r in rejected] == ["not json at all"]


def test_spark_feed_reports_a_bad_option_without_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --option is refused with the option's name and exit code 2 before any Spark work."""
    code = main(
        ["spark-feed", "--input", str(tmp_path), "--url", "http://127.0.0.1:9/events", "--option", "nokey"]
    )
    assert code == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_batch_writer_carries_every_attribute_type(spark: SparkSession, broker: LiveBroker) -> None:
    """``df.write.format("cloudevents")``: timestamp ``time`` as RFC 3339 (core spec 3.1.4),
    binary data as ``data_base64`` (JSON format 3.1), integer, boolean and string extensions."""
    when = dt.datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)
    df = spark.createDataFrame(
        [(f"b-{i}", "com.example.blob", when, bytes([i, 255]), i, i % 2 == 0, "eu") for i in range(5)],
        "id STRING, type STRING, time TIMESTAMP, data BINARY, attempt INT, even BOOLEAN, region STRING",
    )
    df.write.format("cloudevents").mode("append").option("url", broker.events_url).option(
        "source", "/blobs"
    ).save()
    events = {e["id"]: e for e in broker.delivered(5)}
    assert events["b-3"] == {
        "specversion": "1.0",
        "id": "b-3",
        "source": "/blobs",
        "type": "com.example.blob",
        "time": "2024-05-01T12:00:00.500000Z",
        "data_base64": base64.b64encode(bytes([3, 255])).decode(),
        "attempt": 3,
        "even": False,
        "region": "eu",
    }
    assert len(events) == 5


def test_unmappable_column_fails_the_query_at_start(spark: SparkSession, tmp_path: Path) -> None:
    """A column that is not a valid attribute name stops the write before any row is sent."""
    df = spark.createDataFrame([("t", "Ann")], "type STRING, userName STRING")
    with pytest.raises(Exception, match="userName"):
        df.write.format("cloudevents").mode("append").option("url", "http://127.0.0.1:9/events").save()


def test_spark_feed_rate_runs_for_its_duration_and_stops_between_batches(
    spark: SparkSession, broker: LiveBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--rate N --duration S`` generates synthetic events and stops after a finished micro-batch:
    every row the summary counts is in the broker, once."""
    code = main(
        [
            "spark-feed",
            *("--rate", "200", "--duration", "4", "--url", broker.events_url),
            *("--checkpoint", str(tmp_path / "ck"), "--master", "local[2]"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    summary = next(line for line in out.splitlines() if line.startswith("done: "))
    counted = int(summary.split()[1].replace(",", ""))
    assert counted > 0
    events = broker.delivered(counted)
    assert len(events) == counted
    assert len({e["id"] for e in events}) == counted
    assert {e["type"] for e in events} == {"cebroker.spark.rate"}
    assert all(isinstance(e["data"]["seq"], int) and e["time"].endswith("Z") for e in events)


def test_an_event_the_broker_finds_too_large_goes_to_the_error_location(
    spark: SparkSession, make_broker: Callable[..., LiveBroker], tmp_path: Path
) -> None:
    """The broker answers 413 for a batch holding one event over its size limit: the sink splits
    the batch until that event stands alone, records it (origin ``broker``) and delivers the rest."""
    small = make_broker(max_event_size=2048)
    rows = [(f"s-{i}", "com.example.size", "x" * (5000 if i == 7 else 10)) for i in range(30)]
    df = spark.createDataFrame(rows, "id STRING, type STRING, data STRING").coalesce(1)
    errors = tmp_path / "errors"
    (
        df.write.format("cloudevents")
        .mode("append")
        .options(url=small.events_url, source="/sizes", batchSize="10", errorPath=str(errors))
        .save()
    )
    events = small.delivered(29)
    assert sorted(e["id"] for e in events) == sorted(f"s-{i}" for i in range(30) if i != 7)
    (record,) = [
        json.loads(line) for f in errors.rglob("part-*.jsonl") for line in f.read_text().splitlines()
    ]
    assert (record["origin"], record["position"], record["row"]["id"]) == ("broker", 7, "s-7")
    assert "too large" in record["reason"]
