"""CESQL value types, zero values, the cast table (CESQL v1 §3.7) and attribute coercion."""

from __future__ import annotations

import base64
import datetime
import enum
from typing import Final

from cefilters.sql.errors import EvaluationFailure

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "Type",
    "Value",
    "attribute_value",
    "to_bool",
    "to_int",
    "to_str",
    "zero_value",
]

Value = bool | int | str
"""A CESQL value: Boolean, Integer (signed 32-bit) or String."""

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1


class Type(enum.Enum):
    """Static type of an expression; ``ANY`` when only known at evaluation (attributes)."""

    BOOLEAN = "Boolean"
    INTEGER = "Integer"
    STRING = "String"
    ANY = "Any"


_ZERO: Final[dict[Type, Value]] = {Type.BOOLEAN: False, Type.INTEGER: 0, Type.STRING: "", Type.ANY: False}


def zero_value(type_: Type) -> Value:
    """The fail-fast value of a type; an untyped (attribute) expression yields ``false``."""
    return _ZERO[type_]


def to_int(value: Value) -> int:
    """Cast to Integer: Boolean true/false -> 1/0; String as base-10 signed 32-bit."""
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int):
        return value
    # str.isdigit() alone would accept non-ASCII digits; int() also whitespace and "_".
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not (digits.isascii() and digits.isdigit()):
        raise EvaluationFailure("cast", f"cannot cast {_show(value)} to Integer")
    # Checked before int(): a huge digit string must not cost (or trip) a bignum conversion.
    if len(digits.lstrip("0")) <= 10:
        number = int(value)
        if INT32_MIN <= number <= INT32_MAX:
            return number
    raise EvaluationFailure("cast", f"cannot cast {_show(value)} to Integer: outside the 32-bit range")


def to_bool(value: Value) -> bool:
    """Cast to Boolean: Integer 0 -> false, else true; String ``true``/``false`` in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    lowered = value.lower() if value.isascii() else value
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise EvaluationFailure("cast", f"cannot cast {_show(value)} to Boolean")


def to_str(value: Value) -> str:
    """Cast to String: Boolean -> ``true``/``false``; Integer -> base-10 without leading zeros."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _show(value: str) -> str:
    """A string value for an error message, shortened: events may carry huge strings."""
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")


def attribute_value(name: str, raw: object) -> Value:
    """Map an event attribute's JSON-format value to a CESQL value.

    Strings (URI, URI-reference, timestamp text), booleans and 32-bit integers keep their type.
    Objects a JSON decoder or an SDK may hand us instead get their canonical string form:
    ``datetime`` as RFC 3339 (a naive one taken as UTC), ``bytes`` (Binary) as base64. An
    integral float within range is an Integer. Anything else cannot be a CloudEvents attribute
    value and is a generic error.
    """
    if isinstance(raw, str):
        return str(raw)
    if raw is None:
        # Absent, or null, which the JSON format treats as absent.
        raise EvaluationFailure("missingAttribute", f"the event has no attribute {name!r}")
    if isinstance(raw, bool):
        return bool(raw)
    if isinstance(raw, int):
        if INT32_MIN <= raw <= INT32_MAX:
            return int(raw)
        raise EvaluationFailure("generic", f"attribute {name!r} holds an integer outside the 32-bit range")
    if isinstance(raw, float) and raw.is_integer() and INT32_MIN <= raw <= INT32_MAX:
        return int(raw)
    if isinstance(raw, datetime.datetime):
        if raw.tzinfo is None:  # RFC 3339 needs an offset; a naive time is taken as UTC
            raw = raw.replace(tzinfo=datetime.UTC)
        return raw.isoformat().replace("+00:00", "Z")
    if isinstance(raw, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(raw)).decode("ascii")
    raise EvaluationFailure(
        "generic", f"attribute {name!r} holds a {type(raw).__name__}, not a CloudEvents attribute value"
    )
