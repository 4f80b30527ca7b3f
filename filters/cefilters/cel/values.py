"""CEL values as plain Python values, and the operations every other part shares.

CEL ``int`` is a Python ``int`` within 64 bits, ``uint`` a :class:`UInt`, ``double`` a ``float``,
``bool``, ``string`` (``str``), ``bytes``, ``null`` (``None``), ``list`` (``list``), ``map``
(``dict``), ``google.protobuf.Timestamp`` an aware ``datetime`` and ``google.protobuf.Duration`` a
``timedelta``. Using Python's own values means an attribute read costs a dictionary lookup, not a
conversion, which is what keeps an ordinary filter as cheap as it was.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from typing import Any, Final

from .budget import CelEvaluationError

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "UINT_MAX",
    "CelType",
    "UInt",
    "check_int",
    "check_uint",
    "compare",
    "equal",
    "from_input",
    "to_output",
    "type_of",
    "type_name",
]

INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1
UINT_MAX: Final = 2**64 - 1


class UInt(int):
    """A CEL ``uint``: an ``int`` whose type says it is unsigned."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A CEL type value (what ``type(x)`` returns, and what ``int``, ``string`` … name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


TYPES: Final = {
    name: CelType(name)
    for name in (
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
    )
}

_TYPE_OF: Final[dict[type, CelType]] = {
    int: TYPES["int"],
    UInt: TYPES["uint"],
    float: TYPES["double"],
    bool: TYPES["bool"],
    str: TYPES["string"],
    bytes: TYPES["bytes"],
    list: TYPES["list"],
    dict: TYPES["map"],
    type(None): TYPES["null_type"],
    CelType: TYPES["type"],
    datetime.datetime: TYPES["google.protobuf.Timestamp"],
    datetime.timedelta: TYPES["google.protobuf.Duration"],
}


def type_of(value: object) -> CelType:
    """The CEL type of a value of this module's model."""
    found = _TYPE_OF.get(type(value))
    if found is None:
        raise CelEvaluationError(f"a value of Python type {type(value).__name__} has no CEL type")
    return found


def type_name(value: object) -> str:
    """The CEL type name of ``value`` for messages (``int``, ``string`` …)."""
    found = _TYPE_OF.get(type(value))
    return found.name if found is not None else type(value).__name__


def check_int(value: int) -> int:
    """``value`` when it fits a CEL ``int``, else the overflow error."""
    if INT_MIN <= value <= INT_MAX:
        return value
    raise CelEvaluationError("int overflow")


def check_uint(value: int) -> UInt:
    """``value`` as a CEL ``uint`` when it fits, else the overflow error."""
    if 0 <= value <= UINT_MAX:
        return UInt(value)
    raise CelEvaluationError("uint overflow")


_NUMBERS: Final = (int, UInt, float)


def equal(left: object, right: object) -> bool:
    """CEL equality: values of different types are unequal, except numbers, which compare by
    value (``1 == 1u``, ``1 == 1.0``); lists and maps compare member by member."""
    kind = type(left)
    if kind is type(right):
        if isinstance(left, list) and isinstance(right, list):
            return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
        if isinstance(left, dict) and isinstance(right, dict):
            return _maps_equal(left, right)
        return left == right
    if kind in _NUMBERS and type(right) in _NUMBERS:
        return left == right
    return False


def _maps_equal(left: dict[object, object], right: dict[object, object]) -> bool:
    if len(left) != len(right):
        return False
    return all(key in right and equal(value, right[key]) for key, value in left.items())


_ORDERED: Final = frozenset({int, UInt, float, str, bytes, bool, datetime.datetime, datetime.timedelta})


def compare(left: object, right: object) -> int:
    """-1, 0 or 1 as ``left`` sorts before, with or after ``right``; numbers of different kinds
    compare by value; any other pair of different types (or NaN) is a "no such overload"."""
    kind = type(left)
    if kind is not type(right) and not (kind in _NUMBERS and type(right) in _NUMBERS):
        raise CelEvaluationError(f"no such overload: {type_name(left)} < {type_name(right)}")
    if kind not in _ORDERED:
        raise CelEvaluationError(f"no such overload: {type_name(left)} values are not ordered")
    ordered: Callable[[object, object], bool] = _LESS
    if ordered(left, right):
        return -1
    if left == right:
        return 0
    if isinstance(left, float) and math.isnan(left) or isinstance(right, float) and math.isnan(right):
        raise CelEvaluationError("no such overload: NaN is not ordered")
    return 1


def _less(left: Any, right: Any) -> bool:
    # Both of one ordered type (or both numbers): compare() checked it before calling.
    return bool(left < right)


_LESS: Final = _less


def from_input(name: str, value: object) -> object:
    """A variable's value in this module's model, or the error that it has none (an integer
    beyond 64 bits, an object). Plain JSON values pass unchanged: nested members are not
    copied, which is why reading a large payload costs nothing until it is used."""
    kind = type(value)
    if kind is str or kind is bool or kind is float or kind is dict or kind is list or value is None:
        return value
    if isinstance(value, int) and kind is int:
        if INT_MIN <= value <= INT_MAX:
            return value
    elif isinstance(value, str):
        return str.__str__(value)
    elif isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    elif isinstance(value, datetime.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    elif isinstance(value, tuple):
        return list(value)
    elif isinstance(value, UInt | datetime.timedelta):
        return value
    raise CelEvaluationError(f"the variable {name!r} holds a value with no CEL form ({kind.__name__})")


def _timestamp_text(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def _duration_text(value: datetime.timedelta) -> str:
    seconds = value.total_seconds()
    return f"{seconds:g}s" if seconds == int(seconds) else f"{seconds!r}s"


def to_output(value: object) -> object:
    """A result as plain Python/JSON values: ``uint`` as ``int``, a type as its name, a
    timestamp as RFC 3339 text, a duration as seconds text (``"1.5s"``)."""
    if isinstance(value, list):
        return [to_output(member) for member in value]
    if isinstance(value, dict):
        return {to_output(key): to_output(member) for key, member in value.items()}
    if isinstance(value, UInt):
        return int(value)
    if isinstance(value, CelType):
        return value.name
    if isinstance(value, datetime.datetime):
        return _timestamp_text(value)
    if isinstance(value, datetime.timedelta):
        return _duration_text(value)
    return value
