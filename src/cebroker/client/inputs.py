"""JSON the commands read from files or standard input, and ``KEY=VALUE`` pairs from flags."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cebroker.client.connection import CommandError

#: Exit status of a command whose own input is wrong (as for a usage error).
BAD_INPUT = 2


def read_json(name: str, what: str) -> Any:
    """The JSON document in file ``name`` (``-``: standard input); ``what`` names it in errors."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {what} from {name}: {exc.strerror}", exit_code=BAD_INPUT) from exc
    except UnicodeDecodeError as exc:
        raise CommandError(f"{what} in {name} is not UTF-8 text", exit_code=BAD_INPUT) from exc
    source = "standard input" if name == "-" else name
    return parse_json(text, f"{what} in {source}")


def parse_json(text: str, what: str) -> Any:
    """``text`` as JSON; a :class:`CommandError` saying where it is malformed otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{what} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", exit_code=BAD_INPUT
        ) from exc


def pairs(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dict; a value that is JSON (a number, true, an object) is taken as
    such, anything else as text."""
    result: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{flag} needs KEY=VALUE, got {item!r}", exit_code=BAD_INPUT)
        try:
            result[key] = json.loads(value)
        except json.JSONDecodeError:
            result[key] = value
    return result
