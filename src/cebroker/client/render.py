"""Output of the management commands: aligned tables for people, JSON for scripts, and problem
details spelled out one field per line."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

#: Cells longer than this are cut in tables (``--json`` shows everything).
MAX_CELL = 60


def cell(value: Any) -> str:
    """A value as one table cell: ``-`` for nothing, lists joined, long text cut."""
    if value is None or value == "" or value == []:
        text = "-"
    elif isinstance(value, list | tuple):
        text = ", ".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    text = " ".join(text.split())  # one line per row, whatever the value holds
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    """Print ``rows`` under ``headers`` in aligned columns (``(none)`` when there are no rows)."""
    out = out or sys.stdout
    if not rows:
        print("(none)", file=out)
        return
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    for line in [list(headers), *cells]:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip(), file=out)


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    """Print ``name: value`` lines, names aligned; nested values as compact JSON."""
    out = out or sys.stdout
    width = max((len(name) for name, _ in pairs), default=0)
    for name, value in pairs:
        if isinstance(value, dict | list):
            shown = json.dumps(value, ensure_ascii=False)
        else:
            shown = "-" if value is None else str(value)
        print(f"{name + ':':<{width + 1}} {shown}", file=out)


def dump(doc: Any, out: TextIO | None = None) -> None:
    """Print ``doc`` as indented JSON (``--json``)."""
    print(json.dumps(doc, indent=2, ensure_ascii=False), file=out or sys.stdout)


def problem_lines(message: str, problem: Mapping[str, Any] | None) -> list[str]:
    """A failed call as lines for a person: what failed, the problem's title and detail, then each
    entry of ``errors`` with the field it names."""
    lines = [message]
    if not problem:
        return lines
    title, detail = problem.get("title"), problem.get("detail")
    errors = problem.get("errors")
    if isinstance(errors, list) and errors and title:
        lines.append(str(title))  # the detail only sums up the errors listed below
    elif title and detail:
        lines.append(f"{title}: {detail}")
    elif title or detail:
        lines.append(str(title or detail))
    if isinstance(errors, list):
        for error in errors:
            if not isinstance(error, dict):
                continue
            where = _where(error)
            lines.append(f"  {where}: {error.get('detail', error.get('reason', ''))}")
    return lines


def _where(error: Mapping[str, Any]) -> str:
    if "pointer" in error:
        return str(error["pointer"]) or "(body)"
    if "parameter" in error:
        return f"parameter {error['parameter']}"
    if "header" in error:
        return f"header {error['header']}"
    return "(request)"
