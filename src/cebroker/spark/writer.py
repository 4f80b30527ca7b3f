"""What one Spark task does with its partition: convert, validate, send in batches, keep rejects.

This is the executor side of the data source, kept free of Spark classes so that it can be tested
with plain Arrow batches. A task either returns after the broker accepted every valid row of the
partition (and the rejected rows are in the error location), or raises: then Spark retries the
task or the micro-batch, and the deterministic event ids make the broker drop what it already has.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cebroker.spark.client import BatchClient, Refusal
from cebroker.spark.columns import PlannedColumn
from cebroker.spark.events import EventBuilder, RejectedRow
from cebroker.spark.options import SinkOptions
from cebroker.spark.rejects import RejectFile

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True, slots=True)
class TaskScope:
    """Names one task's slice of the output: ``scope`` is the error-location directory,
    ``id_prefix`` the prefix of generated ids, ``partition`` and ``attempt`` Spark's."""

    scope: str
    id_prefix: str
    partition: int
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """Counts for one partition: rows read, events accepted by the broker (``duplicates`` of
    them it already had), rows rejected (by the executor's checks or by the broker), HTTP
    requests and retries among them."""

    rows: int
    accepted: int
    duplicates: int
    rejected: int
    requests: int
    retries: int


def write_partition(
    batches: Iterable[pa.RecordBatch],
    *,
    plan: Sequence[PlannedColumn],
    options: SinkOptions,
    task: TaskScope,
    client_factory: Callable[[SinkOptions], BatchClient] = BatchClient,
) -> PartitionStats:
    """Send every valid row of the partition to the broker; see the module docstring."""
    builder = EventBuilder(
        plan,
        id_prefix=task.id_prefix,
        default_source=options.default_source,
        default_type=options.default_type,
    )
    rejects = RejectFile(options.error_path, task.scope, task.partition, task.attempt)
    rows = 0
    pending: list[dict[str, Any]] = []
    positions: list[int] = []
    try:
        with client_factory(options) as client, _Sender(client, rejects, options.in_flight) as sender:
            for batch in batches:
                names = batch.schema.names
                columns = [column.to_pylist() for column in batch.columns]
                converted = builder.convert(names, columns, rows)
                rows += batch.num_rows
                rejects.add(converted.rejected, "executor")
                pending.extend(converted.events)
                positions.extend(converted.positions)
                while len(pending) >= options.batch_size:
                    sender.submit(pending[: options.batch_size], positions[: options.batch_size])
                    del pending[: options.batch_size]
                    del positions[: options.batch_size]
            sender.submit(pending, positions)
            sender.drain()
            stats = client.stats
    except BaseException:
        rejects.discard()
        raise
    rejects.commit()
    return PartitionStats(
        rows, stats.accepted, stats.duplicates, rejects.count, stats.requests, stats.retries
    )


class _Sender:
    """Posts batches on background threads, up to ``in_flight`` at once, while the task converts
    the next rows (the HTTP wait releases the GIL). Results are taken in submission order on the
    task's thread, which alone writes the reject file."""

    def __init__(self, client: BatchClient, rejects: RejectFile, in_flight: int) -> None:
        self._client = client
        self._rejects = rejects
        self._limit = in_flight
        self._pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="cloudevents-send")
        self._in_flight: deque[tuple[Future[list[Refusal]], list[dict[str, Any]], list[int]]] = deque()

    def __enter__(self) -> _Sender:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # On failure, sends already running finish (an HTTP request cannot be recalled); queued
        # ones are dropped: the task fails and Spark sends the whole partition again.
        self._pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, events: list[dict[str, Any]], positions: list[int]) -> None:
        """Queue one batch; blocks while ``in_flight`` batches are outstanding."""
        if not events:
            return
        while len(self._in_flight) >= self._limit:
            self._finish_oldest()
        self._in_flight.append((self._pool.submit(self._client.send, events), events, positions))

    def drain(self) -> None:
        """Wait for every queued batch; raises the first failure."""
        while self._in_flight:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        future, events, positions = self._in_flight.popleft()
        refusals = future.result()
        if refusals:
            position_of = {id(event): position for event, position in zip(events, positions, strict=True)}
            rows = [
                RejectedRow(position_of.get(id(r.event), -1), r.pointer, r.reason, r.event) for r in refusals
            ]
            self._rejects.add(rows, "broker")
