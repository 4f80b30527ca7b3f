"""Console progress of a ``spark-feed`` query, from Spark's streaming progress reports.

Each report (a ``StreamingQueryProgress``, a dict in PySpark 4) describes one finished
micro-batch: its id, input rows and processing rate. The sink's own counts for that batch
(rejected rows, events the broker already had) come from the batch's ``_summary.json`` in the
error location, or, without one, from counting its rejected-row files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cebroker.spark.rejects import count_rejected, read_summary, streaming_scope


@dataclass(slots=True)
class Totals:
    """Running totals over the micro-batches seen so far."""

    batches: int = 0
    rows: int = 0
    rejected: int = 0
    duplicates: int = 0
    seconds: float = 0.0

    @property
    def rows_per_second(self) -> float:
        """Input rows over the time spent processing batches (not idle time)."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0


class ProgressReporter:
    """Prints one line per micro-batch with data and keeps the totals; feed it reports with
    :meth:`update` as often as convenient (already seen batches are skipped)."""

    def __init__(self, error_path: Path | None, out: Callable[[str], None] = print) -> None:
        self.totals = Totals()
        self._error_path = error_path
        self._out = out
        self._last_batch = -1

    def update(self, reports: Iterable[Mapping[str, Any]]) -> None:
        """Account for every report newer than the last one seen."""
        for report in reports:
            batch_id = int(report["batchId"])
            if batch_id <= self._last_batch:
                continue
            self._last_batch = batch_id
            rows = int(report.get("numInputRows") or 0)
            if rows == 0:
                continue  # an idle trigger: nothing was written
            seconds = int((report.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
            rejected, duplicates = self._sink_counts(str(report["id"]), batch_id)
            self.totals.batches += 1
            self.totals.rows += rows
            self.totals.rejected += rejected
            self.totals.duplicates += duplicates
            self.totals.seconds += seconds
            rate = rows / seconds if seconds > 0 else 0.0
            replayed = f", {duplicates:,} already in the broker" if duplicates else ""
            t = self.totals
            self._out(
                f"batch {batch_id}: {rows:,} rows in {seconds:.2f} s ({rate:,.0f} rows/s), "
                f"{rejected:,} rejected{replayed} | total {t.rows:,} rows, {t.batches:,} batches, "
                f"{t.rejected:,} rejected"
            )

    def summary(self) -> str:
        """The closing line."""
        t = self.totals
        where = f" (rejected rows in {self._error_path})" if t.rejected and self._error_path else ""
        replayed = f", {t.duplicates:,} already in the broker" if t.duplicates else ""
        return (
            f"done: {t.rows:,} rows in {t.batches:,} batches, {t.rows_per_second:,.0f} rows/s while "
            f"busy, {t.rejected:,} rejected{where}{replayed}"
        )

    def _sink_counts(self, query_id: str, batch_id: int) -> tuple[int, int]:
        """(rejected rows, events the broker already had) for one micro-batch."""
        if self._error_path is None:
            return 0, 0
        scope = streaming_scope(query_id, batch_id)
        summary = read_summary(self._error_path, scope)
        if summary is not None:
            return summary.get("rejected", 0), summary.get("duplicates", 0)
        return count_rejected(self._error_path, scope), 0
