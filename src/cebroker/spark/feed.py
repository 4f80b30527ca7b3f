"""The ``cebroker spark-feed`` job: a file-stream (or rate) query into the broker.

The same job runs on ``local[*]`` or on a cluster (``--master spark://...``, ``yarn``, ``k8s://``):
only the master URL changes. With ``--once`` it uses Spark's available-now trigger and returns
when every file present at start is in the broker; otherwise it keeps following the directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cebroker.spark.columns import SchemaError, plan_columns
from cebroker.spark.datasource import SHORT_NAME, CloudEventsDataSource
from cebroker.spark.options import SinkOptions
from cebroker.spark.progress import ProgressReporter
from cebroker.spark.schema import column_specs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Unavailable|Rejected): ")
CORRUPT_COLUMN = "_corrupt_record"
#: Reader options per input format, for schema inference and the stream alike. CSV: a header
#: line names the columns, and a quote inside a quoted cell is doubled (RFC 4180, as spreadsheets
#: and Python's csv module write it); Spark's default escape character is a backslash, which
#: would split such a cell and turn the line into a corrupt record.
_READER_OPTIONS: dict[str, dict[str, str]] = {"csv": {"header": "true", "escape": '"'}}


class FeedError(RuntimeError):
    """The feed cannot start or failed; the message says why and what to do."""


#: The data source options that have a flag (or argument) of their own: lower-cased name -> flag.
FLAG_OPTIONS = {
    "url": "--url",
    "checkpointlocation": "--checkpoint",
    "batchsize": "--batch-size",
    "errorpath": "--error-path",
    "source": "--source",
    "type": "--type",
}


@dataclass(frozen=True, kw_only=True)
class FeedConfig:
    """What ``spark-feed`` runs; built from the command line."""

    url: str
    input: Path | None = None
    format: str = "json"
    rate: int | None = None
    master: str = "local[*]"
    once: bool = False
    checkpoint: Path | None = None
    batch_size: int | None = None
    error_path: Path | None = None
    source: str | None = None
    type: str | None = None
    schema: str | None = None
    duration: float | None = None
    sink_options: Mapping[str, str] = field(default_factory=dict)

    def checkpoint_dir(self) -> Path:
        """The checkpoint: given (``--checkpoint``, or ``--option checkpointLocation=...``), or
        one per (input, url) under ``./.spark-feed/``."""
        if self.checkpoint is not None:
            return self.checkpoint
        for key, value in self.sink_options.items():
            if key.lower() == "checkpointlocation":
                return Path(value)
        what = f"{self.input.resolve() if self.input else f'rate:{self.rate}'}|{self.url}"
        return Path.cwd() / ".spark-feed" / hashlib.sha256(what.encode()).hexdigest()[:16]

    def options(self) -> dict[str, str]:
        """The data source options of the query: the ``--option`` pairs and the flags. Names are
        lower-cased, as Spark treats them case-insensitively.

        Raises:
            FeedError: an ``--option`` sets what a flag given too sets (``batchSize`` and
                ``--batch-size``, say): neither silently wins.
        """
        flags: dict[str, object] = {
            "url": self.url,
            "checkpointlocation": self.checkpoint,
            "batchsize": self.batch_size,
            "errorpath": self.error_path,
            "source": self.source,
            "type": self.type,
        }
        for key in self.sink_options:
            if flags.get(key.lower()) is not None:
                raise FeedError(
                    f"--option {key} conflicts with {FLAG_OPTIONS[key.lower()]}: give one of them"
                )
        opts = {key.lower(): value for key, value in self.sink_options.items()}
        opts["url"] = self.url
        opts["checkpointlocation"] = str(self.checkpoint_dir())
        if self.batch_size is not None:
            opts["batchsize"] = str(self.batch_size)
        if self.error_path is not None:
            opts["errorpath"] = str(self.error_path)
        if self.source:
            opts["source"] = self.source
        else:
            opts.setdefault(
                "source", f"file://{self.input.resolve()}" if self.input else "urn:cebroker:spark-feed:rate"
            )
        if self.type:
            opts["type"] = self.type
        elif self.rate is not None:
            opts.setdefault("type", "cebroker.spark.rate")
        return opts


def build_session(master: str, app_name: str = "cebroker-spark-feed") -> SparkSession:
    """A Spark session for ``master``; local masters bind to the loopback interface only."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        # Spark's stage bar would interleave with the feed's own progress lines.
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(CloudEventsDataSource)
    return spark


def input_stream(spark: SparkSession, config: FeedConfig) -> DataFrame:
    """The streaming DataFrame the feed reads: files of ``config.format``, or the rate source."""
    from pyspark.sql import functions as F

    if config.rate is not None:
        rate = spark.readStream.format("rate").option("rowsPerSecond", config.rate).load()
        return rate.select(
            F.col("timestamp").alias("time"), F.struct(F.col("value").alias("seq")).alias("data")
        )
    if config.input is None:
        raise FeedError("give --input DIR (files to feed) or --rate N (synthetic load)")
    reader = spark.readStream.format(config.format).options(**_READER_OPTIONS.get(config.format, {}))
    if config.format in ("json", "csv"):
        # Malformed lines become rows carrying the raw text; the sink moves them to the error location.
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
    return reader.schema(_schema(spark, config, config.input)).load(str(config.input))


def _schema(spark: SparkSession, config: FeedConfig, directory: Path) -> str:
    """The input schema as DDL: given, or inferred from the files present now; JSON and CSV
    always get the corrupt-record column so a malformed line is never read as an empty row."""
    from pyspark.errors import AnalysisException

    if config.schema:
        ddl = config.schema
    else:
        try:
            reader = spark.read.format(config.format).options(**_READER_OPTIONS.get(config.format, {}))
            ddl = reader.load(str(directory)).schema.toDDL()
        except AnalysisException as exc:
            raise FeedError(
                f"cannot infer a schema from {directory} ({str(exc).splitlines()[0]}); add input files "
                "first or pass --schema 'id STRING, type STRING, ...'"
            ) from None
    if config.format in ("json", "csv") and CORRUPT_COLUMN not in ddl:
        ddl = f"{ddl}, {CORRUPT_COLUMN} STRING"
    return ddl


def start_query(spark: SparkSession, config: FeedConfig) -> StreamingQuery:
    """Start the streaming query into the broker (options and columns checked before it starts)."""
    options = config.options()
    sink = SinkOptions.parse(options)  # fail with the option's name before any Spark job starts
    stream = input_stream(spark, config)
    _check_columns(stream.schema, sink)
    writer = stream.writeStream.format(SHORT_NAME).options(**options)
    # Following: a one-second cadence batches the rate source's rows and leaves gaps between
    # micro-batches in which --duration can stop the query without cancelling one.
    trigger = {"availableNow": True} if config.once else {"processingTime": "1 second"}
    return writer.trigger(**trigger).start()


def _check_columns(schema: StructType, sink: SinkOptions) -> None:
    """Refuse an input with a column no CloudEvent can hold before the query starts. The sink
    makes the same check, but only inside the running query, where Spark logs the failure with
    a JVM stack trace and a hint to resume from the checkpoint that cannot help."""
    try:
        plan_columns(
            column_specs(schema), sink.corrupt_record_column, ignore_null_fields=sink.ignore_null_fields
        )
    except SchemaError as exc:
        raise FeedError(f"the input cannot become CloudEvents: {exc}") from None


def run(config: FeedConfig, out: Callable[[str], None] = print) -> int:
    """Run the feed until it is done (``--once``), ``--duration`` passes, or Ctrl-C; exit code."""
    from pyspark.errors import PySparkException, StreamingQueryException

    if config.once and config.rate is not None:
        raise FeedError("--once needs --input: the rate source never runs out of rows")
    # The options are checked before Spark starts: a bad one costs no JVM.
    options = SinkOptions.parse(config.options())
    spark = build_session(config.master)
    reporter = ProgressReporter(options.error_path, out)
    what = config.input.resolve() if config.input else f"{config.rate} rows/s"
    out(f"feeding {what} into {config.url} (checkpoint {config.checkpoint_dir()})")
    try:
        query = start_query(spark, config)
    except PySparkException as exc:
        raise FeedError(f"the query did not start: {reason(exc)}") from None
    deadline = time.monotonic() + config.duration if config.duration else None
    try:
        while not query.awaitTermination(1):
            reporter.update(query.recentProgress)
            if deadline is not None and time.monotonic() >= deadline:
                _stop_between_batches(query)
    except StreamingQueryException as exc:
        reporter.update(query.recentProgress)
        out(f"query failed: {reason(exc)}")
        out(
            "once the cause is fixed, run the same command again: it resumes from the checkpoint "
            "and the broker drops the events it already has"
        )
        return 1
    except KeyboardInterrupt:
        query.stop()
        out("stopped")
    reporter.update(query.recentProgress)
    out(reporter.summary())
    return 0


def _stop_between_batches(query: StreamingQuery, patience: float = 30.0) -> None:
    """Stop once the running micro-batch (if any) has finished, so ``--duration`` does not cancel
    a half-sent batch; after ``patience`` seconds stop regardless (a re-run is de-duplicated)."""
    give_up = time.monotonic() + patience
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < give_up:
        time.sleep(0.1)
    query.stop()


def reason(exc: BaseException) -> str:
    """The useful line of a Spark error: Spark wraps Python worker errors in a long message with
    the worker's traceback, whose last ``module.Error: text`` line says what went wrong."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    ours = [line for line in raised if line.startswith("cebroker.")]
    if ours or raised:
        return (ours or raised)[-1]
    return lines[0] if lines else type(exc).__name__
