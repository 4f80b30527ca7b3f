"""How the explain path words its details, and how it explains a filter of any origin.

Details are written for a person and never dump a large value: quoted values are cut after
:data:`QUOTE_LIMIT` characters, messages after :data:`MESSAGE_LIMIT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .base import Event, Filter, canonical_string
from .checks import Check, Explainable

__all__ = [
    "MESSAGE_LIMIT",
    "QUOTE_LIMIT",
    "attribute_detail",
    "describe",
    "explain_filter",
    "quote",
    "shorten",
    "summary",
]

QUOTE_LIMIT: Final = 64
"""Characters of a value shown in a detail before it is cut."""

MESSAGE_LIMIT: Final = 200
"""Characters of an evaluation error message (CESQL, CEL) shown in a detail before it is cut."""


def explain_filter(filter_: Filter, event: Event, pointer: str) -> list[Check]:
    """``filter_.explain(event, pointer)``, or one check from ``matches`` for a filter built
    outside this library that cannot explain itself."""
    if isinstance(filter_, Explainable):
        return filter_.explain(event, pointer)
    matched = filter_.matches(event)
    outcome = "matched" if matched else "did not match"
    return [Check(pointer, matched, f"{type(filter_).__name__} {outcome} (it gives no reasons)")]


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with the full length said when it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` in quotes, control characters escaped, cut after ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def describe(value: object) -> str:
    """A short description of an event attribute's value, never longer than a quote."""
    if type(value) is str:
        return quote(value)
    canonical = canonical_string(value)
    if canonical is None:
        return f"a {type(value).__name__} with no CloudEvents string form"
    return f"{type(value).__name__} {quote(canonical)}"


def attribute_detail(event: Event, name: str) -> tuple[str | None, str]:
    """The attribute's canonical string (``None`` when there is none) and how to speak of it.

    Reads the attribute exactly as the attribute dialects and the index do: the value's canonical
    string, a missing attribute or one without a string form comparing as nothing.
    """
    value = event.get(name)
    if value is None:
        return None, f"the event has no {name}"
    if type(value) is str:
        return value, quote(value)
    canonical = canonical_string(value)
    if canonical is None:
        return None, f"{name} is {describe(value)}, which compares as nothing"
    return canonical, f"{quote(canonical)} ({type(value).__name__})"


def summary(label: str, checks: Sequence[Check], matched: bool, *, every: bool) -> str:
    """The detail of a logical filter: how many of its nested conditions held, and which.

    ``every`` is ``True`` for a conjunction (``all``, the filters array), ``False`` for ``any``.
    """
    total = len(checks)
    held = [check.pointer for check in checks if check.matched]
    failed = [check.pointer for check in checks if not check.matched]
    counted = f"{label}: {len(held)} of {total} conditions matched"
    if every:
        return counted if matched else f"{counted}; not matched: {_pointers(failed)}"
    return f"{counted}: {_pointers(held)}" if matched else f"{label}: none of {total} conditions matched"


def _pointers(pointers: list[str], limit: int = 8) -> str:
    shown = ", ".join(pointers[:limit])
    return shown if len(pointers) <= limit else f"{shown} and {len(pointers) - limit} more"
