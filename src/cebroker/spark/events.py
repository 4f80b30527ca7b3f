"""Turn columns of Arrow values into CloudEvents (JSON-format dicts) and rejected rows.

The work is column-wise (one conversion pass per column that needs one), then one pass that
assembles each row's event: this keeps the per-row cost to a dict build, which is what lets a
Python executor keep up with the broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cebroker.spark import attributes as ce
from cebroker.spark.columns import PlannedColumn, json_value

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RejectedRow:
    """A row that cannot become a valid CloudEvent: its position in the partition, the member it
    failed on (a JSON Pointer, or ``None`` for the row as a whole), why, and its values."""

    position: int
    pointer: str | None
    reason: str
    row: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Converted:
    """The outcome of one chunk: the valid events (in row order) with their partition positions,
    and the rejected rows."""

    events: list[Event]
    positions: list[int]
    rejected: list[RejectedRow]


class EventBuilder:
    """Builds events for one partition of one micro-batch (or batch job).

    ``id_prefix`` names that partition of that batch (query id, batch id, partition id); a row
    without an ``id`` gets ``<id_prefix><position>``, the same on every retry of the batch, so the
    broker's ``(source, id)`` de-duplication drops a replayed event.
    """

    def __init__(
        self,
        plan: Sequence[PlannedColumn],
        *,
        id_prefix: str,
        default_source: str | None,
        default_type: str | None,
    ) -> None:
        self._plan = list(plan)
        self._id_prefix = id_prefix
        self._defaults = {"source": default_source, "type": default_type}

    def convert(self, names: Sequence[str], columns: Sequence[list[Any]], start: int) -> Converted:
        """Convert one chunk; ``columns`` are the chunk's values per input column (in ``names``
        order) and ``start`` is the partition position of its first row."""
        by_name = dict(zip(names, columns, strict=True))
        rows = len(columns[0]) if columns else 0
        problems: dict[int, tuple[str | None, str]] = {}
        targets: list[str] = []
        values: list[list[Any]] = []
        for col in self._plan:
            converted = self._convert_column(col, by_name[col.name], problems)
            if col.target is not None:
                targets.append(col.target)
                values.append(converted)

        events: list[Event] = []
        positions: list[int] = []
        rejected: list[RejectedRow] = []
        # When the row has a value in every column and the columns cover the required
        # attributes, there is nothing to complete: the common bulk case stays a plain dict build.
        covered = {"id", "source", "type"} <= set(targets) and not {"data", "data_base64"} <= set(targets)
        for index, row in enumerate(zip(*values, strict=True) if values else ((),) * rows):
            problem = problems.get(index) if problems else None
            if problem is None:
                full = None not in row
                pairs = zip(targets, row, strict=True)
                event: Event = dict(pairs) if full else {t: v for t, v in pairs if v is not None}
                event["specversion"] = ce.SPECVERSION
                if not (full and covered):
                    problem = self._complete(event, start + index)
                if problem is None:
                    events.append(event)
                    positions.append(start + index)
                    continue
            original = {n: json_value(c[index], strict=False) for n, c in zip(names, columns, strict=True)}
            rejected.append(RejectedRow(start + index, problem[0], problem[1], original))
        return Converted(events, positions, rejected)

    @staticmethod
    def _convert_column(
        col: PlannedColumn, raw: list[Any], problems: dict[int, tuple[str | None, str]]
    ) -> list[Any]:
        convert = col.convert
        if convert is None:
            return raw
        out: list[Any] = [None] * len(raw)
        pointer = col.pointer if col.target is not None else None
        for index, value in enumerate(raw):
            if value is None:
                continue
            try:
                out[index] = convert(value)
            except ce.InvalidValue as exc:
                problems.setdefault(index, (pointer, str(exc)))
        return out

    def _complete(self, event: Event, position: int) -> tuple[str | None, str] | None:
        """Fill defaults and the deterministic id; the remaining problem, if any."""
        if "id" not in event:
            event["id"] = f"{self._id_prefix}{position}"
        for name in ("source", "type"):
            if name not in event:
                default = self._defaults[name]
                if default is None:
                    return f"/{name}", f"missing required attribute {name!r} (no column value, no default)"
                event[name] = default
        if "data" in event and "data_base64" in event:
            return "/data_base64", "an event carries either data or data_base64, not both"
        return None
