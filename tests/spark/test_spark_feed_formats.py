"""``cebroker spark-feed --once`` over CSV and parquet inputs, against the real broker and sink;
and the inputs it must refuse before starting (schema not inferable, a column no event can hold)."""

from __future__ import annotations

import csv
import datetime as dt
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cebroker.cli import main
from spark.conftest import LiveBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NOWHERE = "http://127.0.0.1:9/events"  # never contacted: these feeds must not start


def feed_once(inputs: Path, fmt: str, url: str, checkpoint: Path, *extra: str) -> list[str]:
    """The ``spark-feed --once`` arguments (on the session-scoped ``local[2]`` Spark)."""
    return [
        *("spark-feed", "--input", str(inputs), "--format", fmt, "--once", "--url", url),
        *("--master", "local[2]", "--checkpoint", str(checkpoint), "--batch-size", "16", *extra),
    ]


def delivered_once(broker: LiveBroker, count: int) -> dict[str, dict[str, Any]]:
    """The sink's events by id, after checking that each id arrived exactly once."""
    events = broker.delivered(count)
    counts = Counter(e["id"] for e in events)
    assert [key for key, n in counts.items() if n > 1] == []
    return {e["id"]: e for e in events}


def test_spark_feed_once_csv(
    spark: SparkSession, broker: LiveBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CSV with a header (every column a string): each row becomes one event (core spec 3: id,
    source, type; 3.1.4 time as RFC 3339; 3.3 extension ``region``), quoted cells (RFC 4180: commas,
    quotes) arrive intact as string ``data``, and an empty cell means the attribute is absent."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    header = ["id", "type", "subject", "time", "region", "data"]
    rows = [
        [f"c-{i}", "com.example.csv", f"order {i}" if i % 3 else "", f"2024-05-01T10:00:{i:02d}Z", "eu"]
        + [f'qty {i}, "boxed", ünïcode']
        for i in range(40)
    ]
    for name, part in (("a.csv", rows[:25]), ("b.csv", rows[25:])):
        with (inputs / name).open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(part)

    code = main(feed_once(inputs, "csv", broker.events_url, tmp_path / "ck"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "done: 40 rows in 1 batches" in out
    assert ", 0 rejected" in out
    events = delivered_once(broker, 40)
    assert sorted(events) == sorted(f"c-{i}" for i in range(40))
    source = f"file://{inputs.resolve()}"
    for i in range(40):
        expected = {
            "specversion": "1.0",
            "id": f"c-{i}",
            "source": source,
            "type": "com.example.csv",
            "time": f"2024-05-01T10:00:{i:02d}Z",
            "region": "eu",
            "data": f'qty {i}, "boxed", ünïcode',
        }
        if i % 3:
            expected["subject"] = f"order {i}"
        assert events[f"c-{i}"] == expected


def test_spark_feed_once_parquet(
    spark: SparkSession, broker: LiveBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parquet with typed columns: a UTC timestamp ``time`` as RFC 3339 (core spec 3.1.4), a struct
    ``data`` as a JSON object with null fields left out (JSON format 3.1), integer and boolean
    extensions as JSON numbers and booleans (core spec 3.3, 1.1 type system), the rows' own
    ``source``, and null attributes absent."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    start = dt.datetime(2024, 5, 1, 10, 0, 0, 250000, tzinfo=dt.UTC)

    def table(ids: range) -> pa.Table:
        return pa.table(
            {
                "id": [f"p-{i}" for i in ids],
                "source": [f"/shop/{i % 2}" for i in ids],
                "type": ["com.example.parquet"] * len(ids),
                "subject": [None if i % 4 == 0 else f"sku-{i}" for i in ids],
                "time": pa.array(
                    [start + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")
                ),
                "attempt": pa.array(list(ids), pa.int32()),
                "urgent": [i % 2 == 0 for i in ids],
                "data": pa.array(
                    [{"sku": f"sku-{i}", "qty": None if i == 5 else i} for i in ids],
                    pa.struct([("sku", pa.string()), ("qty", pa.int64())]),
                ),
            }
        )

    pq.write_table(table(range(0, 30)), inputs / "a.parquet")
    pq.write_table(table(range(30, 50)), inputs / "b.parquet")

    code = main(feed_once(inputs, "parquet", broker.events_url, tmp_path / "ck"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "done: 50 rows in 1 batches" in out
    assert ", 0 rejected" in out
    events = delivered_once(broker, 50)
    assert sorted(events) == sorted(f"p-{i}" for i in range(50))
    for i in range(50):
        when = (start + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        expected: dict[str, Any] = {
            "specversion": "1.0",
            "id": f"p-{i}",
            "source": f"/shop/{i % 2}",
            "type": "com.example.parquet",
            "time": when,
            "attempt": i,
            "urgent": i % 2 == 0,
            "data": {"sku": f"sku-{i}"} if i == 5 else {"sku": f"sku-{i}", "qty": i},
        }
        if i % 4:
            expected["subject"] = f"sku-{i}"
        assert events[f"p-{i}"] == expected


def _write_bad_parquet(inputs: Path) -> None:
    pq.write_table(pa.table({"id": ["1"], "type": ["t"], "score": [1.5]}), inputs / "a.parquet")


def _write_bad_csv(inputs: Path) -> None:
    with (inputs / "a.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["id", "type", "userName"], ["1", "t", "Ann"]])


@pytest.mark.parametrize(
    ("fmt", "write", "message"),
    [
        ("csv", None, "cannot infer a schema from"),
        ("parquet", None, "cannot infer a schema from"),
        ("parquet", _write_bad_parquet, "extension column 'score' has type float"),
    ],
    ids=["csv-empty", "parquet-empty", "parquet-double-extension"],
)
def test_spark_feed_refuses_an_input_it_cannot_map(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fmt: str,
    write: Any,
    message: str,
) -> None:
    """An input directory with nothing to infer a schema from, or whose columns include one no
    CloudEvents attribute can hold (core spec 3.3: extensions are strings, booleans, integers,
    timestamps or binary), fails with the reason on stderr and exit code 2, before a query starts."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    if write is not None:
        write(inputs)
    code = main(feed_once(inputs, fmt, NOWHERE, tmp_path / "ck"))
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.startswith("cebroker spark-feed: ")
    assert message in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "ck" / "offsets").exists()  # no query was started


def test_spark_feed_process_refuses_a_column_that_is_no_attribute(tmp_path: Path) -> None:
    """The real command in its own process: a CSV column named ``userName`` (attribute names are
    lower-case a-z and 0-9, core spec 3.1) ends it with one clear line on stderr, exit code 2, and
    neither a Python traceback nor Spark's JVM stack trace."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    _write_bad_csv(inputs)
    done = subprocess.run(
        [sys.executable, "-m", "cebroker", *feed_once(inputs, "csv", NOWHERE, tmp_path / "ck")],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("cebroker spark-feed: ")]
    assert "column 'userName' is not a CloudEvents attribute name" in line
    assert "Traceback" not in done.stderr
    assert "\tat org.apache.spark" not in done.stderr
    assert not (tmp_path / "ck" / "offsets").exists()
