"""Checks an event in the JSON form at the edge (CloudEvents 1.0 core, JSON Event Format 1.0).

Every problem is reported, each with a JSON Pointer to the attribute (``/time``), prefixed by
the event's index in a batch (``/3/time``). Inside the broker events are then trusted.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ceprotocols.eventform import ATTRIBUTE_NAME, is_timestamp

from cebroker.errors import FieldProblem

_REQUIRED = ("id", "source", "type")
_STRING_ATTRIBUTES = frozenset({"id", "source", "type", "subject", "datacontenttype", "dataschema"})
_PAYLOAD = frozenset({"data", "data_base64"})
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _check_value(name: str, value: Any, pointer: str, problems: list[FieldProblem]) -> None:
    if name in _STRING_ATTRIBUTES or name in ("specversion", "time"):
        if not isinstance(value, str):
            problems.append(FieldProblem(pointer, "must be a string"))
        return
    # Extension attributes: the core type system's Boolean, Integer or String (binary, URI and
    # timestamp values travel as strings in the JSON format).
    if isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            problems.append(FieldProblem(pointer, "integer is outside the signed 32-bit range"))
        return
    problems.append(FieldProblem(pointer, "extension attribute must be a string, integer or boolean"))


#: Attribute names already checked against the naming rule (bounded; they repeat a lot).
_KNOWN_NAMES: set[str] = {
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "subject",
    "datacontenttype",
    "dataschema",
}
_KNOWN_LIMIT = 4096


def _looks_valid(event: Any) -> bool:
    """The fast path of :func:`event_problems`: True only for events the full check accepts
    (a property test holds the two together); anything else gets the full check."""
    if type(event) is not dict or event.get("specversion") != "1.0":
        return False
    for name in _REQUIRED:
        value = event.get(name)
        if type(value) is not str or not value:
            return False
    for name, value in event.items():
        if name in _PAYLOAD:
            continue
        if name not in _KNOWN_NAMES:
            if type(name) is not str or not ATTRIBUTE_NAME.fullmatch(name):
                return False
            if len(_KNOWN_NAMES) < _KNOWN_LIMIT:
                _KNOWN_NAMES.add(name)
        kind = type(value)
        if kind is not str and (name in _STRING_ATTRIBUTES or (kind is not bool and kind is not int)):
            return False
        if kind is int and not _INT_MIN <= value <= _INT_MAX:
            return False
    time = event.get("time")
    if time is not None and (type(time) is not str or not is_timestamp(time)):
        return False
    return "data_base64" not in event


def name_accepted(name: object) -> bool:
    """Whether ``name`` may name an attribute (the payload members are not attributes)."""
    return type(name) is str and name not in _PAYLOAD and ATTRIBUTE_NAME.fullmatch(name) is not None


def any_text_accepted(name: str) -> bool:
    """Whether every string is a value :func:`value_accepted` accepts for the attribute ``name``
    (all but ``specversion``, ``time`` and the required ones)."""
    return name not in _REQUIRED and name != "specversion" and name != "time"


def value_accepted(name: str, value: object) -> bool:
    """True only for a value the full check accepts for the attribute ``name`` (an accepted
    name, :func:`name_accepted`) in an event it accepts: what :func:`_looks_valid` asks of each
    attribute, plus ``specversion`` 1.0 and the required ones not empty. An event whose
    attributes are all accepted, that has the required ones and no ``data_base64``, has no
    problems (a property test holds this to the full check)."""
    if type(value) is str:
        if name == "specversion":
            return value == "1.0"
        if name == "time":
            return is_timestamp(value)
        return bool(value) or name not in _REQUIRED
    if name in _STRING_ATTRIBUTES or name == "specversion" or name == "time":
        return False
    return type(value) is bool or (type(value) is int and _INT_MIN <= value <= _INT_MAX)


def event_problems(event: Any, prefix: str = "") -> list[FieldProblem]:
    """Every problem of one event; ``prefix`` is ``/<index>`` inside a batch, else empty."""
    if _looks_valid(event):
        return []
    return _problems(event, prefix)


def _problems(event: Any, prefix: str) -> list[FieldProblem]:
    """The full check: every problem, each with its pointer."""
    if not isinstance(event, Mapping):
        return [FieldProblem(prefix or "/", "an event is a JSON object")]
    problems: list[FieldProblem] = []
    specversion = event.get("specversion")
    if specversion is None:
        problems.append(FieldProblem(f"{prefix}/specversion", "required attribute is missing"))
    elif specversion != "1.0":
        problems.append(FieldProblem(f"{prefix}/specversion", f"unsupported specversion {specversion!r}"))
    for name in _REQUIRED:
        value = event.get(name)
        if value is None:
            problems.append(FieldProblem(f"{prefix}/{name}", "required attribute is missing"))
        elif isinstance(value, str) and not value:
            problems.append(FieldProblem(f"{prefix}/{name}", "must not be empty"))
    for name, value in event.items():
        if name in _PAYLOAD:
            continue
        pointer = f"{prefix}/{name}"
        if not isinstance(name, str) or not ATTRIBUTE_NAME.fullmatch(name):
            problems.append(FieldProblem(pointer, "attribute names are 1-20 characters of a-z and 0-9"))
            continue
        if value is None:
            continue  # null means absent (JSON Event Format 2.2)
        _check_value(name, value, pointer, problems)
    time = event.get("time")
    if isinstance(time, str) and not is_timestamp(time):
        problems.append(FieldProblem(f"{prefix}/time", "must be an RFC 3339 timestamp"))
    if "data" in event and event.get("data_base64") is not None:
        problems.append(FieldProblem(f"{prefix}/data_base64", "an event has data or data_base64, not both"))
    encoded = event.get("data_base64")
    if encoded is not None:
        if not isinstance(encoded, str):
            problems.append(FieldProblem(f"{prefix}/data_base64", "must be a base64 string"))
        else:
            try:
                base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                problems.append(FieldProblem(f"{prefix}/data_base64", "is not valid base64"))
    return problems


def normalize(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with ``null`` attributes removed (they mean absent); ``"data": null`` stays.

    Returns ``event`` itself when it has no null member (the common case; no copy).
    """
    if type(event) is dict and None not in event.values():
        return event
    return {k: v for k, v in event.items() if v is not None or k == "data"}
