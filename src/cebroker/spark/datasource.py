"""The PySpark data source ``cloudevents``: batch and streaming writers into the broker.

Register it once per session with :func:`cebroker.spark.register`, then::

    df.writeStream.format("cloudevents").option("url", "http://127.0.0.1:8080/events") ...
    df.write.format("cloudevents").mode("append").option("url", ...).save()

Options are parsed and the schema is mapped when the writer is created on the driver, so a bad
option or an unmappable column fails the query at start with a message naming it. The writers
receive Arrow record batches (no per-row ``Row`` objects) and hand them to
:func:`cebroker.spark.writer.write_partition`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from cebroker.spark.columns import PlannedColumn, plan_columns
from cebroker.spark.options import SinkConfigError, SinkOptions
from cebroker.spark.rejects import streaming_scope, write_summary
from cebroker.spark.schema import column_specs
from cebroker.spark.writer import PartitionStats, TaskScope, write_partition

log = logging.getLogger("cebroker.spark")

SHORT_NAME = "cloudevents"
# Local properties Spark's micro-batch execution sets on every task of a batch.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass
class PartitionReport(WriterCommitMessage):
    """The commit message of one task: its error-location scope, partition and counts."""

    scope: str
    partition: int
    stats: PartitionStats


class CloudEventsDataSource(DataSource):
    """Writes rows to a cebroker (or any CloudEvents batch-mode HTTP receiver) as CloudEvents."""

    @classmethod
    def name(cls) -> str:
        """The short name used with ``format(...)``."""
        return SHORT_NAME

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """The batch writer (``df.write.format("cloudevents")``)."""
        options, plan = _prepare(schema, self.options, overwrite)
        return CloudEventsBatchWriter(options, plan)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """The streaming writer (``df.writeStream.format("cloudevents")``)."""
        options, plan = _prepare(schema, self.options, overwrite)
        return CloudEventsStreamWriter(options, plan)


class CloudEventsStreamWriter(DataSourceStreamArrowWriter):
    """Sends each micro-batch; ids of rows without one derive from (query, batch, partition, row)."""

    def __init__(self, options: SinkOptions, plan: list[PlannedColumn]) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionReport:
        """Send this task's partition of the micro-batch (runs on an executor)."""
        context = _task_context()
        query_id = context.getLocalProperty(_QUERY_ID_PROPERTY)
        batch_id = context.getLocalProperty(_BATCH_ID_PROPERTY)
        if not query_id or batch_id is None:
            raise RuntimeError("the cloudevents stream writer runs outside a streaming micro-batch")
        partition = context.partitionId()
        task = TaskScope(
            scope=streaming_scope(query_id, int(batch_id)),
            id_prefix=f"{query_id}:{batch_id}:{partition}:",
            partition=partition,
            attempt=context.attemptNumber(),
        )
        stats = write_partition(iterator, plan=self.plan, options=self.options, task=task)
        return PartitionReport(task.scope, partition, stats)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task succeeded: the micro-batch is in the broker. Its counts go beside its
        rejected rows, where ``spark-feed`` reads them for its progress lines."""
        log.info("micro-batch %d committed: %s", batchId, _summary(messages))
        reports = [m for m in messages if isinstance(m, PartitionReport)]
        if reports and self.options.error_path is not None:
            write_summary(self.options.error_path, reports[0].scope, _counts(reports))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A task failed; the events already accepted stay (a replay is de-duplicated)."""
        log.warning("micro-batch %d aborted: %s", batchId, _summary(messages))


class CloudEventsBatchWriter(DataSourceArrowWriter):
    """Sends a DataFrame once; ids of rows without one derive from (job, partition, row)."""

    def __init__(self, options: SinkOptions, plan: list[PlannedColumn]) -> None:
        self.options = options
        self.plan = plan
        # Chosen on the driver, so a retried task of this job reuses the ids of its first attempt.
        self.job_id = str(uuid.uuid4())

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionReport:
        """Send this task's partition (runs on an executor)."""
        context = _task_context()
        partition = context.partitionId()
        task = TaskScope(
            scope=f"job-{self.job_id}",
            id_prefix=f"{self.job_id}:{partition}:",
            partition=partition,
            attempt=context.attemptNumber(),
        )
        stats = write_partition(iterator, plan=self.plan, options=self.options, task=task)
        return PartitionReport(task.scope, partition, stats)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task succeeded."""
        log.info("batch write %s committed: %s", self.job_id, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """A task failed; what was accepted stays in the broker."""
        log.warning("batch write %s aborted: %s", self.job_id, _summary(messages))


def _prepare(
    schema: StructType, raw: Mapping[str, str], overwrite: bool
) -> tuple[SinkOptions, list[PlannedColumn]]:
    if overwrite:
        raise SinkConfigError(
            "mode", "events are only ever appended; use append mode (or output mode 'append')"
        )
    options = SinkOptions.parse(raw)
    plan = plan_columns(
        column_specs(schema), options.corrupt_record_column, ignore_null_fields=options.ignore_null_fields
    )
    return options, plan


def _task_context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the cloudevents writer must run inside a Spark task")
    return context


def _counts(reports: list[PartitionReport]) -> dict[str, int]:
    return {
        "partitions": len(reports),
        "rows": sum(r.stats.rows for r in reports),
        "accepted": sum(r.stats.accepted for r in reports),
        "duplicates": sum(r.stats.duplicates for r in reports),
        "rejected": sum(r.stats.rejected for r in reports),
    }


def _summary(messages: list[WriterCommitMessage | None]) -> str:
    c = _counts([m for m in messages if isinstance(m, PartitionReport)])
    return (
        f"{c['partitions']} partitions, {c['rows']} rows, {c['accepted']} events accepted "
        f"({c['duplicates']} already in the broker), {c['rejected']} rejected"
    )
