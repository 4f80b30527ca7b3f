"""The error location: rows that could not become CloudEvents, with the reason, as JSON lines.

Layout under the configured ``errorPath``::

    <errorPath>/query-<query id>/batch-<batch id>/part-<partition>.jsonl   (streaming)
    <errorPath>/job-<job id>/part-<partition>.jsonl                          (batch writes)

Each line is one rejected row::

    {"position": 17, "pointer": "/time", "reason": "not an RFC 3339 timestamp: 'yesterday'",
     "origin": "executor", "row": {"id": "a-17", "time": "yesterday", ...}}

``origin`` is ``executor`` (checked before sending) or ``broker`` (the broker refused it).
When a streaming micro-batch commits, ``_summary.json`` beside its part files gives the batch's
counts (``rows``, ``accepted``, ``duplicates``, ``rejected``), also when nothing was rejected.
A partition's file is written to a temporary name and renamed into place when the partition has
been sent, so a retried task replaces its file instead of adding duplicates, and a file a reader
sees is complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from cebroker.spark.events import RejectedRow


class RejectedRowsError(ValueError):
    """Rows were rejected but no error location is configured to keep them."""


class RejectFile:
    """The rejected rows of one partition; write them with :meth:`add`, then :meth:`commit`."""

    def __init__(self, root: Path | None, scope: str, partition: int, attempt: int = 0) -> None:
        self.count = 0
        self.path = root / scope / f"part-{partition:05d}.jsonl" if root else None
        self._tmp = (
            self.path.with_name(f".{self.path.name}.{attempt}.{os.getpid()}.tmp") if self.path else None
        )
        self._out: IO[str] | None = None

    def add(self, rows: list[RejectedRow], origin: str) -> None:
        """Record ``rows``; raise :class:`RejectedRowsError` if there is nowhere to put them."""
        if not rows:
            return
        if self._tmp is None:
            first = rows[0]
            raise RejectedRowsError(
                f"{len(rows)} row(s) cannot become CloudEvents (first, at position {first.position}: "
                f"{first.pointer or 'row'}: {first.reason}); set the errorPath option to keep such rows "
                "aside instead of failing"
            )
        if self._out is None:
            self._tmp.parent.mkdir(parents=True, exist_ok=True)
            self._out = self._tmp.open("w", encoding="utf-8")
        for row in rows:
            self._out.write(json.dumps(_record(row, origin), ensure_ascii=False, default=str) + "\n")
        self.count += len(rows)

    def commit(self) -> None:
        """Move the file into place (only if something was rejected)."""
        if self._out is None or self._tmp is None or self.path is None:
            return
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        self._out = None
        os.replace(self._tmp, self.path)

    def discard(self) -> None:
        """Drop the temporary file of a failed attempt."""
        if self._out is not None and self._tmp is not None:
            self._out.close()
            self._out = None
            self._tmp.unlink(missing_ok=True)


def _record(row: RejectedRow, origin: str) -> dict[str, Any]:
    return {
        "position": row.position,
        "pointer": row.pointer,
        "reason": row.reason,
        "origin": origin,
        "row": row.row,
    }


def streaming_scope(query_id: str, batch_id: int) -> str:
    """The directory (relative to the error location) of one micro-batch."""
    return f"query-{query_id}/batch-{batch_id}"


def write_summary(root: Path, scope: str, counts: dict[str, int]) -> None:
    """Write a committed micro-batch's counts (atomically) as ``<scope>/_summary.json``."""
    directory = root / scope
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"._summary.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(counts), encoding="utf-8")
    os.replace(tmp, directory / "_summary.json")


def read_summary(root: Path, scope: str) -> dict[str, int] | None:
    """The counts :func:`write_summary` left for ``scope``, if any."""
    try:
        counts = json.loads((root / scope / "_summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None


def count_rejected(root: Path, scope: str) -> int:
    """Rows rejected in ``scope`` so far (committed partition files only)."""
    directory = root / scope
    if not directory.is_dir():
        return 0
    total = 0
    for path in directory.glob("part-*.jsonl"):
        with path.open("rb") as handle:
            total += sum(1 for _ in handle)
    return total
