"""One task's partition: chunks of ``batchSize`` events, rejected rows in the error location.

Uses real Arrow record batches (as Spark hands them to the writer) and a scripted transport.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from cebroker.spark.client import BatchClient
from cebroker.spark.columns import ColumnSpec, ValueKind, plan_columns
from cebroker.spark.options import RetryPolicy, SinkOptions
from cebroker.spark.rejects import RejectedRowsError, count_rejected
from cebroker.spark.writer import TaskScope, write_partition

PLAN = plan_columns(
    [ColumnSpec("type", ValueKind.STRING), ColumnSpec("time", ValueKind.STRING)], "_corrupt_record"
)
TASK = TaskScope(scope="query-q/batch-3", id_prefix="q:3:0:", partition=0)


def arrow(types: list[str | None], times: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"type": types, "time": times})


class Broker:
    """Accepts batches (optionally refusing the event with a given id) and records them."""

    def __init__(self, refuse_id: str | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.refuse_id = refuse_id

    def __call__(self, request: httpx.Request) -> httpx.Response:
        batch = json.loads(request.content)
        bad = [i for i, e in enumerate(batch) if e["id"] == self.refuse_id]
        if bad:
            return httpx.Response(
                400, json={"errors": [{"pointer": f"/{bad[0]}/type", "detail": "unknown type"}]}
            )
        self.batches.append(batch)
        return httpx.Response(202)

    def factory(self, options: SinkOptions) -> BatchClient:
        return BatchClient(options, transport=httpx.MockTransport(self))


def test_events_go_in_batches_of_batch_size_and_rejects_to_the_error_location(tmp_path: Path) -> None:
    """5 valid rows with batchSize 2 -> 3 requests; the invalid row is in the error file."""
    broker = Broker()
    options = SinkOptions(
        url="http://b/events", batch_size=2, in_flight=1, default_source="/s", error_path=tmp_path
    )
    batches = [arrow(["a", "b", "c"], [None, "bad time", None]), arrow(["d", "e", "f"], [None, None, None])]
    stats = write_partition(batches, plan=PLAN, options=options, task=TASK, client_factory=broker.factory)
    assert [len(b) for b in broker.batches] == [2, 2, 1]
    assert [e["id"] for b in broker.batches for e in b] == [f"q:3:0:{i}" for i in (0, 2, 3, 4, 5)]
    assert (stats.rows, stats.accepted, stats.rejected, stats.requests) == (6, 5, 1, 3)
    lines = (tmp_path / "query-q/batch-3/part-00000.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    assert (record["position"], record["pointer"], record["origin"]) == (1, "/time", "executor")
    assert record["row"] == {"type": "b", "time": "bad time"}
    assert count_rejected(tmp_path, "query-q/batch-3") == 1


def test_broker_refusals_are_recorded_with_their_position(tmp_path: Path) -> None:
    """An event the broker names in a 400 goes to the error location; the rest is accepted."""
    broker = Broker(refuse_id="q:3:0:1")
    options = SinkOptions(url="http://b/events", default_source="/s", error_path=tmp_path)
    stats = write_partition(
        [arrow(["a", "b", "c"], [None] * 3)],
        plan=PLAN,
        options=options,
        task=TASK,
        client_factory=broker.factory,
    )
    assert stats.accepted == 2
    record = json.loads((tmp_path / "query-q/batch-3/part-00000.jsonl").read_text())
    assert (record["position"], record["origin"], record["reason"]) == (
        1,
        "broker",
        "refused by the broker: unknown type",
    )


def test_a_retried_task_replaces_its_error_file(tmp_path: Path) -> None:
    """Re-running the same task writes the same file again instead of adding duplicate lines."""
    options = SinkOptions(url="http://b/events", default_source="/s", error_path=tmp_path)
    for attempt in range(2):
        task = TaskScope(scope=TASK.scope, id_prefix=TASK.id_prefix, partition=0, attempt=attempt)
        write_partition(
            [arrow(["a", None], [None, None])],
            plan=PLAN,
            options=options,
            task=task,
            client_factory=Broker().factory,
        )
    assert count_rejected(tmp_path, TASK.scope) == 1
    assert [p.name for p in (tmp_path / TASK.scope).iterdir()] == ["part-00000.jsonl"]


def test_failed_task_leaves_no_error_file(tmp_path: Path) -> None:
    """If the broker cannot be reached the task raises and its partial error file is discarded."""

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    options = SinkOptions(
        url="http://b/events", default_source="/s", error_path=tmp_path, retry=RetryPolicy(max_time=0)
    )
    with pytest.raises(RuntimeError, match="gave up"):
        write_partition(
            [arrow(["a", None], [None, None])],
            plan=PLAN,
            options=options,
            task=TASK,
            client_factory=lambda o: BatchClient(o, transport=httpx.MockTransport(down)),
        )
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_rejects_without_error_location_fail_loudly() -> None:
    """A rejected row is never dropped silently: without errorPath the task fails naming the reason."""
    options = SinkOptions(url="http://b/events", default_source="/s")
    with pytest.raises(RejectedRowsError, match=r"position 1: /type.*errorPath"):
        write_partition(
            [arrow(["a", None], [None, None])],
            plan=PLAN,
            options=options,
            task=TASK,
            client_factory=Broker().factory,
        )
