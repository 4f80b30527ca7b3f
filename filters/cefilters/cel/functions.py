"""CEL's standard functions over this package's value model (see :mod:`.values`).

Each takes evaluated arguments and returns a value or raises :class:`CelEvaluationError`; the
compiler looks them up by name, as a global call (``size(x)``) or a method (``x.size()``), and
adds the position of the call to any error.
"""

from __future__ import annotations

import datetime
import functools
import re
import zoneinfo
from collections.abc import Callable
from typing import Any, Final, Protocol

from .budget import CelEvaluationError
from .values import INT_MIN, CelType, UInt, check_int, check_uint, type_name, type_of

__all__ = ["FUNCTIONS", "MAX_PATTERN", "METHODS", "Function", "pattern_factor", "regex"]

Function = Callable[..., object]


def _overload(name: str, *args: object) -> CelEvaluationError:
    kinds = ", ".join(type_name(arg) for arg in args)
    return CelEvaluationError(f"no such overload: {name}({kinds})")


def _size(value: object) -> int:
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    raise _overload("size", value)


def _contains(text: object, part: object) -> bool:
    if isinstance(text, str) and isinstance(part, str):
        return part in text
    raise _overload("contains", text, part)


def _starts_with(text: object, prefix: object) -> bool:
    if type(text) is str and type(prefix) is str:
        return text.startswith(prefix)
    raise _overload("startsWith", text, prefix)


def _ends_with(text: object, suffix: object) -> bool:
    if type(text) is str and type(suffix) is str:
        return text.endswith(suffix)
    raise _overload("endsWith", text, suffix)


class Pattern(Protocol):
    """A compiled RE2 regular expression (the part of google-re2's type used here)."""

    pattern: str

    def search(self, text: str) -> object | None: ...


@functools.cache
def _re2_options() -> Any:
    import re2  # deferred with the rest of CEL

    options = re2.Options()
    options.log_errors = False  # the error is reported to the caller, not printed on stderr
    return options


MAX_PATTERN: Final = 4096
"""Longest regular expression ``matches`` accepts, in characters (a literal one cannot be longer:
it is part of an expression of at most 4096 characters)."""


def pattern_factor(pattern: str) -> int:
    """How many times the cost of reading the text a pattern adds: RE2 is linear in the text,
    but a long pattern multiplies the constant (one more per 16 characters)."""
    return 1 + len(pattern) // 16


def regex(pattern: str) -> Pattern:
    """``pattern`` compiled with RE2, or the evaluation error that it is not a regular expression.

    RE2, not Python's ``re``: CEL's ``matches`` is specified with RE2 syntax, and RE2 runs in
    time linear in the text whatever the pattern, so ``matches("^(a+)+$")`` cannot backtrack
    for ever on a hostile attribute (Python's ``re`` would, holding the event loop).
    """
    import re2

    if len(pattern) > MAX_PATTERN:
        raise CelEvaluationError(f"the regular expression is longer than {MAX_PATTERN} characters")
    try:
        compiled: Pattern = re2.compile(pattern, options=_re2_options())
    except (re2.error, TypeError, ValueError) as error:
        detail = error.args[0] if error.args else error
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise CelEvaluationError(f"invalid regular expression: {text}") from None
    return compiled


def _matches(text: object, pattern: object) -> bool:
    if isinstance(text, str) and isinstance(pattern, str):
        return regex(pattern).search(text) is not None
    raise _overload("matches", text, pattern)


def _int(value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, UInt):
        return check_int(int(value))
    if isinstance(value, float):
        if value != value or not INT_MIN <= value < 2.0**63:
            raise CelEvaluationError("int overflow: the double is out of range")
        return int(value)
    if isinstance(value, str):
        try:
            return check_int(int(value, 10))
        except ValueError:
            raise CelEvaluationError(f"cannot convert {value[:40]!r} to int") from None
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    raise _overload("int", value)


def _uint(value: object) -> UInt:
    if isinstance(value, UInt):
        return value
    if isinstance(value, bool):
        raise _overload("uint", value)
    if isinstance(value, int):
        return check_uint(value)
    if isinstance(value, float):
        if value != value or not 0 <= value < 2.0**64:
            raise CelEvaluationError("uint overflow: the double is out of range")
        return UInt(int(value))
    if isinstance(value, str):
        try:
            return check_uint(int(value, 10))
        except ValueError:
            raise CelEvaluationError(f"cannot convert {value[:40]!r} to uint") from None
    raise _overload("uint", value)


def _double(value: object) -> float:
    if isinstance(value, bool):
        raise _overload("double", value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise CelEvaluationError(f"cannot convert {value[:40]!r} to double") from None
    raise _overload("double", value)


def _string(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return (
            repr(value)
            if value == value and abs(value) != float("inf")
            else str(value).replace("inf", "Infinity")
        )
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise CelEvaluationError("the bytes are not UTF-8") from None
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
        return f"{seconds:g}s" if seconds == int(seconds) else f"{seconds!r}s"
    if isinstance(value, CelType):
        return value.name
    raise _overload("string", value)


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise _overload("bytes", value)


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in ("true", "True", "TRUE", "t", "1"):
            return True
        if value in ("false", "False", "FALSE", "f", "0"):
            return False
        raise CelEvaluationError(f"cannot convert {value[:40]!r} to bool")
    raise _overload("bool", value)


def _dyn(value: object) -> object:
    return value


def _type(value: object) -> CelType:
    return type_of(value)


def _timestamp(value: object) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise CelEvaluationError(f"cannot convert {value[:40]!r} to a timestamp") from None
        if parsed.tzinfo is None:
            raise CelEvaluationError("a timestamp needs a time zone offset")
        return parsed
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return datetime.datetime.fromtimestamp(value, datetime.UTC)
        except (OverflowError, ValueError, OSError):
            raise CelEvaluationError("timestamp overflow") from None
    raise _overload("timestamp", value)


_DURATION: Final = re.compile(r"(-?)((?:\d+(?:\.\d*)?|\.\d+)(?:h|ms|us|ns|m|s))+")
_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|ns|m|s)")
_UNIT_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _duration(value: object) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, str) and len(value) <= 64 and _DURATION.fullmatch(value):
        seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(value))
        try:
            return datetime.timedelta(seconds=-seconds if value.startswith("-") else seconds)
        except OverflowError:
            raise CelEvaluationError("duration overflow") from None
    if isinstance(value, str):
        raise CelEvaluationError(f"cannot convert {value[:40]!r} to a duration")
    raise _overload("duration", value)


def _zone(name: object) -> datetime.tzinfo:
    if not isinstance(name, str):
        raise _overload("time zone", name)
    found = re.fullmatch(r"([+-])(\d\d):(\d\d)", name)
    if found:
        offset = datetime.timedelta(hours=int(found.group(2)), minutes=int(found.group(3)))
        return datetime.timezone(-offset if found.group(1) == "-" else offset)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CelEvaluationError(f"unknown time zone {name[:40]!r}") from None


def _time_part(
    name: str, part: Callable[[datetime.datetime], int], whole: Callable[[datetime.timedelta], int] | None
) -> Function:
    def get(value: object, zone: object = "UTC") -> int:
        if isinstance(value, datetime.datetime):
            return part(value.astimezone(_zone(zone)))
        if whole is not None and isinstance(value, datetime.timedelta) and zone == "UTC":
            return whole(value)
        raise _overload(name, value)

    return get


def _seconds(value: datetime.timedelta) -> int:
    return int(value.total_seconds())


_TIME_PARTS: Final[dict[str, Function]] = {
    "getFullYear": _time_part("getFullYear", lambda t: t.year, None),
    "getMonth": _time_part("getMonth", lambda t: t.month - 1, None),
    "getDate": _time_part("getDate", lambda t: t.day, None),
    "getDayOfMonth": _time_part("getDayOfMonth", lambda t: t.day - 1, None),
    "getDayOfWeek": _time_part("getDayOfWeek", lambda t: (t.weekday() + 1) % 7, None),
    "getDayOfYear": _time_part("getDayOfYear", lambda t: t.timetuple().tm_yday - 1, None),
    "getHours": _time_part("getHours", lambda t: t.hour, lambda d: _seconds(d) // 3600),
    "getMinutes": _time_part("getMinutes", lambda t: t.minute, lambda d: _seconds(d) // 60),
    "getSeconds": _time_part("getSeconds", lambda t: t.second, _seconds),
    "getMilliseconds": _time_part(
        "getMilliseconds", lambda t: t.microsecond // 1000, lambda d: int(d.total_seconds() * 1000)
    ),
}

FUNCTIONS: Final[dict[str, Function]] = {
    "size": _size,
    "contains": _contains,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "matches": _matches,
    "int": _int,
    "uint": _uint,
    "double": _double,
    "string": _string,
    "bytes": _bytes,
    "bool": _bool,
    "dyn": _dyn,
    "type": _type,
    "timestamp": _timestamp,
    "duration": _duration,
}
"""Global functions, ``name(args…)``."""

METHODS: Final[dict[str, Function]] = {
    "size": _size,
    "contains": _contains,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "matches": _matches,
    **_TIME_PARTS,
}
"""Receiver-style functions, ``target.name(args…)``: the target is the first argument."""
