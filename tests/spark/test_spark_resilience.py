"""A broker that refuses for a while (503 with Retry-After, as under backpressure) and recovers:
no loss and no duplicate deliveries, whether the sink's retries outlast the refusal or the
micro-batch fails and is run again from the checkpoint."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark.conftest import LiveBroker
from spark.proxy import RefusingProxy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 200
BATCH = 20


def write_rows(directory: Path) -> None:
    directory.mkdir()
    for part in range(2):
        rows = [{"type": "com.example.reading", "data": {"n": part * 100 + i}} for i in range(ROWS // 2)]
        (directory / f"part{part}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def start(spark: SparkSession, inputs: Path, checkpoint: Path, url: str, **options: str) -> StreamingQuery:
    return (
        spark.readStream.schema("type STRING, data STRUCT<n: BIGINT>")
        .json(str(inputs))
        .repartition(2)
        .writeStream.format("cloudevents")
        .option("url", url)
        .option("source", "/readings")
        .option("batchSize", BATCH)
        .option("retryInitialBackoff", "0.05")
        .option("retryMaxBackoff", "0.2")
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
    )


def assert_each_reading_once(broker: LiveBroker) -> None:
    events = broker.delivered(ROWS)
    counts = Counter(e["id"] for e in events)
    assert [key for key, n in counts.items() if n > 1] == []
    assert sorted(e["data"]["n"] for e in events) == list(range(ROWS))


def test_retries_outlast_a_refusing_broker(
    spark: SparkSession, broker: LiveBroker, proxy: tuple[RefusingProxy, str], tmp_path: Path
) -> None:
    """503 + Retry-After for 2 s after the first two requests: the tasks wait and resend; every
    event arrives once and the query finishes normally."""
    refusing, url = proxy
    write_rows(tmp_path / "in")
    refusing.refuse_after(2, seconds=2.0)
    start(spark, tmp_path / "in", tmp_path / "checkpoint", url).awaitTermination(120)
    assert refusing.refused >= 2
    assert_each_reading_once(broker)


def test_a_failed_micro_batch_runs_again_without_duplicates(
    spark: SparkSession, broker: LiveBroker, proxy: tuple[RefusingProxy, str], tmp_path: Path
) -> None:
    """The refusal outlasts the retry budget, so the micro-batch fails after part of it was
    accepted; the query restarted from its checkpoint sends the whole batch again with the same
    ids and the broker delivers nothing twice."""
    from pyspark.errors import StreamingQueryException

    refusing, url = proxy
    inputs, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    write_rows(inputs)
    refusing.refuse_after(3, seconds=4.0)
    with pytest.raises(StreamingQueryException, match="gave up"):
        start(spark, inputs, checkpoint, url, retryMaxTime="0.5").awaitTermination(120)
    accepted_before = refusing.forwarded_events
    assert 0 < accepted_before < ROWS

    refusing.refuse_after(10**6, seconds=0)  # the broker is back
    start(spark, inputs, checkpoint, url).awaitTermination(120)
    assert refusing.forwarded_events == accepted_before + ROWS  # the whole batch was sent again
    (summary,) = (checkpoint / "errors").glob("query-*/batch-0/_summary.json")
    assert json.loads(summary.read_text())["duplicates"] == accepted_before
    assert_each_reading_once(broker)
