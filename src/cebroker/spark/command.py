"""The ``spark-feed`` subcommand's arguments; PySpark is imported only when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from cebroker.options import Duration, Integer, OptionParser, argument_type

_POSITIVE = argument_type(Integer(minimum=1))


def add_spark_feed(sub: argparse._SubParsersAction[OptionParser]) -> None:
    """Add ``cebroker spark-feed`` to the command line."""
    p = sub.add_parser(
        "spark-feed",
        help="feed files (or synthetic load) into the broker with Spark",
        description=(
            "Run a Spark Structured Streaming query that posts every row of the input files to the "
            "broker as a CloudEvent (batch content mode). Columns named like CloudEvents attributes "
            "become attributes, a 'data' column the payload. Needs the 'spark' extra (pyspark, pyarrow) "
            "and Java 17."
        ),
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--input", type=Path, help="directory of input files to follow")
    what.add_argument("--rate", type=_POSITIVE, metavar="N", help="generate N synthetic rows per second")
    p.add_argument(
        "--format",
        choices=("json", "parquet", "csv"),
        default="json",
        help="input file format (default: json)",
    )
    p.add_argument(
        "--url", required=True, help="the broker's events endpoint, e.g. http://127.0.0.1:8080/events"
    )
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master URL: local[*] (default), spark://host:7077, yarn, k8s://...",
    )
    p.add_argument(
        "--once", action="store_true", help="feed the files present now, then exit (available-now)"
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="checkpoint directory (default: ./.spark-feed/<hash of input and url>)",
    )
    p.add_argument(
        "--batch-size",
        type=_POSITIVE,
        default=None,
        help="events per HTTP request (default: 1000, the data source's batchSize)",
    )
    p.add_argument("--error-path", type=Path, help="where rejected rows go (default: <checkpoint>/errors)")
    p.add_argument("--source", help="source attribute for rows without one (default: file://<input dir>)")
    p.add_argument("--type", help="type attribute for rows without one")
    p.add_argument("--schema", help="input schema as DDL, e.g. 'id STRING, type STRING, data STRING'")
    p.add_argument(
        "--duration",
        type=argument_type(Duration(positive=True)),
        metavar="DURATION",
        help="stop after this long (following mode); seconds, or with a unit: 90s, 10m, 1h",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra data source option, e.g. bearerToken=..., requestTimeout=10 (repeatable)",
    )


def run_spark_feed(args: argparse.Namespace) -> int:
    """Run the feed described by the parsed arguments; returns the exit code."""
    import sys

    from cebroker.spark.feed import FeedConfig, FeedError, run
    from cebroker.spark.options import SinkConfigError

    extra = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            print(f"cebroker spark-feed: --option needs KEY=VALUE, got {pair!r}", file=sys.stderr)
            return 2
        extra[key] = value
    config = FeedConfig(
        url=args.url,
        input=args.input,
        format=args.format,
        rate=args.rate,
        master=args.master,
        once=args.once,
        checkpoint=args.checkpoint,
        batch_size=args.batch_size,
        error_path=args.error_path,
        source=args.source,
        type=args.type,
        schema=args.schema,
        duration=args.duration,
        sink_options=extra,
    )
    try:
        return run(config)
    except (FeedError, SinkConfigError) as exc:
        print(f"cebroker spark-feed: {exc}", file=sys.stderr)
        return 2
