"""The spark-feed pieces that need no Spark: option assembly, progress lines, error reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from cebroker.spark.feed import FeedConfig, FeedError, reason
from cebroker.spark.options import SinkConfigError, SinkOptions
from cebroker.spark.progress import ProgressReporter
from cebroker.spark.rejects import streaming_scope, write_summary


def test_feed_options_defaults(tmp_path: Path) -> None:
    """Rows without source get the input directory as a file URI; --option pairs are passed
    whatever the case of their names (Spark options are case-insensitive), and one that a flag
    given too sets is refused: neither silently wins (docs/spark.md)."""
    config = FeedConfig(
        url="http://b/events",
        input=tmp_path,
        checkpoint=tmp_path / "ck",
        batch_size=7,
        sink_options={"retryMaxTime": "9", "source": "/mine"},
    )
    assert config.options() == {
        "url": "http://b/events",
        "checkpointlocation": str(tmp_path / "ck"),
        "batchsize": "7",
        "retrymaxtime": "9",
        "source": "/mine",
    }
    honoured = FeedConfig(url="http://b/events", input=tmp_path, sink_options={"batchSize": "0"})
    assert honoured.options()["batchsize"] == "0"  # the data source then refuses it, by name
    with pytest.raises(SinkConfigError, match="batchSize"):
        SinkOptions.parse(honoured.options())
    own = FeedConfig(url="http://b/events", input=tmp_path, sink_options={"checkpointLocation": "/ck"})
    assert own.options()["checkpointlocation"] == "/ck"
    assert own.checkpoint_dir() == Path("/ck")
    for flag, option in (
        ({"batch_size": 7}, "BatchSize"),
        ({"checkpoint": tmp_path}, "checkpointLocation"),
        ({"source": "/s"}, "source"),
        ({"type": "t"}, "TYPE"),
        ({"error_path": tmp_path}, "errorPath"),
        ({}, "url"),
    ):
        clash = FeedConfig(url="http://b/events", input=tmp_path, sink_options={option: "x"}, **flag)
        with pytest.raises(FeedError, match=f"--option {option} conflicts with"):
            clash.options()
    plain = FeedConfig(url="http://b/events", input=tmp_path).options()
    assert plain["source"] == f"file://{tmp_path.resolve()}"
    assert "type" not in plain
    assert "batchsize" not in plain  # the data source's default applies
    rate = FeedConfig(url="http://b/events", rate=10)
    assert rate.options()["type"] == "cebroker.spark.rate"
    assert rate.checkpoint_dir() != FeedConfig(url="http://other/events", rate=10).checkpoint_dir()


def test_progress_lines_count_rejects_per_batch(tmp_path: Path) -> None:
    """One line per micro-batch with data, idle triggers skipped; rejects counted from the error
    files, or taken with the broker's duplicates from the batch summary when there is one."""
    scope = tmp_path / streaming_scope("q1", 1)
    scope.mkdir(parents=True)
    (scope / "part-00000.jsonl").write_text('{"reason": "x"}\n{"reason": "y"}\n')
    lines: list[str] = []
    reporter = ProgressReporter(tmp_path, lines.append)
    reports = [
        {"id": "q1", "batchId": 0, "numInputRows": 1000, "durationMs": {"triggerExecution": 500}},
        {"id": "q1", "batchId": 1, "numInputRows": 10, "durationMs": {"triggerExecution": 100}},
        {"id": "q1", "batchId": 2, "numInputRows": 0, "durationMs": {"triggerExecution": 3}},
    ]
    reporter.update(reports[:2])
    write_summary(
        tmp_path, streaming_scope("q1", 3), {"rows": 5, "accepted": 5, "duplicates": 5, "rejected": 0}
    )
    reports.append({"id": "q1", "batchId": 3, "numInputRows": 5, "durationMs": {"triggerExecution": 50}})
    reporter.update(reports)  # the first two already seen: one new line
    assert lines == [
        "batch 0: 1,000 rows in 0.50 s (2,000 rows/s), 0 rejected | total 1,000 rows, 1 batches, 0 rejected",
        "batch 1: 10 rows in 0.10 s (100 rows/s), 2 rejected | total 1,010 rows, 2 batches, 2 rejected",
        "batch 3: 5 rows in 0.05 s (100 rows/s), 0 rejected, 5 already in the broker | total 1,015 rows, "
        "3 batches, 2 rejected",
    ]
    summary = reporter.summary()
    assert summary.startswith("done: 1,015 rows in 3 batches, 1,562 rows/s while busy, 2 rejected")
    assert summary.endswith(", 5 already in the broker")


def test_reason_picks_our_error_out_of_a_spark_traceback() -> None:
    """Spark wraps a worker failure in its traceback; the console shows the line that matters."""
    wrapped = RuntimeError(
        "[STREAM_FAILED] Query terminated with exception: Job aborted.\n"
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "httpx.ConnectError: refused\n"
        "cebroker.spark.client.IngestUnavailable: POST http://b/events: gave up after 3 attempts\n"
        "\tat org.apache.spark.Foo(Foo.scala:1)"
    )
    assert (
        reason(wrapped)
        == "cebroker.spark.client.IngestUnavailable: POST http://b/events: gave up after 3 attempts"
    )
    assert reason(RuntimeError("plain failure\nmore")) == "plain failure"


def test_the_broker_and_its_cli_never_import_pyspark() -> None:
    """``cebroker serve`` runs without the spark extra: building the CLI and the app imports no
    pyspark; and the executor-side modules import neither pyspark nor the broker service."""
    import subprocess
    import sys

    def leftovers(imports: str, forbidden: str) -> str:
        probe = f"import sys, {imports};print(sorted(m for m in sys.modules if m.startswith({forbidden})))"
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert leftovers("cebroker.cli, cebroker.app", "('pyspark',)") == "[]"
    executor_side = "cebroker.spark.writer, cebroker.spark.client, cebroker.spark.rejects"
    assert leftovers(executor_side, "('pyspark', 'starlette', 'cebroker.app', 'cebroker.pipeline')") == "[]"
