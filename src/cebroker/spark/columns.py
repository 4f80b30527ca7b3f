"""How each input column becomes part of a CloudEvent, decided once per query from the schema.

A column named like a CloudEvents attribute becomes that attribute; ``data`` becomes the payload
(``data`` for strings, numbers and nested values, ``data_base64`` for binary); ``data_base64`` is
passed through after a base64 check; the corrupt-record column of Spark's JSON and CSV readers
marks a malformed input line. Every other column must be a valid extension name with a type the
CloudEvents type system can carry. Problems with the *schema* raise :class:`SchemaError` on the
driver when the query starts; problems with a *value* raise
:class:`~cebroker.spark.attributes.InvalidValue` per row and send that row to the error location.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cebroker.spark import attributes as ce

Converter = Callable[[Any], Any]


class SchemaError(ValueError):
    """A column cannot be mapped onto a CloudEvent; the message names it and says what to do."""


class ValueKind(enum.Enum):
    """The shape of a column's values as they arrive from Arrow."""

    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    FLOAT = "float"
    TIMESTAMP = "timestamp"
    DATE = "date"
    BINARY = "binary"
    #: struct whose fields are all strings, integers or booleans (the common payload shape)
    FLAT_STRUCT = "flat-struct"
    #: struct, array or map whose leaves are all JSON-native (strings, integers, booleans)
    NESTED_JSON = "nested-json"
    #: struct, array or map with leaves that need conversion (timestamps, binary, decimals, maps)
    NESTED = "nested"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One input column: its name and value kind (built from the Spark schema)."""

    name: str
    kind: ValueKind


@dataclass(frozen=True, slots=True)
class PlannedColumn:
    """Where a column goes in the event (``target``; ``None`` for the corrupt-record marker) and
    the conversion its non-null values need (``None`` when they pass unchanged)."""

    name: str
    target: str | None
    convert: Converter | None

    @property
    def pointer(self) -> str:
        """The JSON Pointer naming this column's member in the event."""
        return f"/{self.target}" if self.target else f"/{self.name}"


def plan_columns(
    columns: Sequence[ColumnSpec], corrupt_column: str, *, ignore_null_fields: bool = True
) -> list[PlannedColumn]:
    """Map every column, the corrupt-record marker first so its reason wins; raise on the first
    column that no CloudEvent can hold. With ``ignore_null_fields`` (as Spark's ``to_json``),
    null fields of a struct ``data`` are left out of the JSON."""
    planned = [_plan(spec, corrupt_column, ignore_null_fields) for spec in columns]
    seen: dict[str, str] = {}
    for col in planned:
        if col.target is not None and seen.setdefault(col.target, col.name) != col.name:
            raise SchemaError(
                f"columns {seen[col.target]!r} and {col.name!r} both become {col.target!r}; keep one"
            )
    planned.sort(key=lambda col: col.target is not None)
    return planned


def _plan(spec: ColumnSpec, corrupt_column: str, ignore_null_fields: bool) -> PlannedColumn:
    name, kind = spec.name, spec.kind
    if name == corrupt_column:
        return PlannedColumn(name, None, _reject_corrupt)
    if name == "data":
        return _plan_data(spec, ignore_null_fields)
    if name == "data_base64":
        _require(spec, {ValueKind.STRING}, "a base64 string")
        return PlannedColumn(name, name, ce.check_base64)
    if not ce.is_attribute_name(name):
        raise SchemaError(
            f"column {name!r} is not a CloudEvents attribute name (lower-case a-z and 0-9, 1 to 20 "
            "characters); rename or drop it before writing"
        )
    if name == "id":
        if kind is ValueKind.INTEGER:
            return PlannedColumn(name, name, str)
        _require(spec, {ValueKind.STRING}, "a string or an integer")
        return PlannedColumn(name, name, ce.check_non_empty)
    if name == "time":
        if kind is ValueKind.TIMESTAMP:
            return PlannedColumn(name, name, ce.format_timestamp)
        _require(spec, {ValueKind.STRING}, "a timestamp or an RFC 3339 string")
        return PlannedColumn(name, name, ce.check_rfc3339)
    if name in ("source", "type", "subject", "datacontenttype", "dataschema", "specversion"):
        _require(spec, {ValueKind.STRING}, "a string")
        checks = {"dataschema": ce.check_absolute_uri, "specversion": ce.check_specversion}
        return PlannedColumn(name, name, checks.get(name, ce.check_non_empty))
    return _plan_extension(spec)


def _plan_extension(spec: ColumnSpec) -> PlannedColumn:
    converters: dict[ValueKind, Converter | None] = {
        ValueKind.STRING: None,
        ValueKind.BOOLEAN: None,
        ValueKind.INTEGER: ce.check_int32,
        ValueKind.TIMESTAMP: ce.format_timestamp,
        ValueKind.BINARY: _b64,
    }
    if spec.kind not in converters:
        raise SchemaError(
            f"extension column {spec.name!r} has type {spec.kind.value}; CloudEvents extensions are "
            "strings, booleans, integers, timestamps or binary: cast it (e.g. to string)"
        )
    return PlannedColumn(spec.name, spec.name, converters[spec.kind])


def _plan_data(spec: ColumnSpec, ignore_null_fields: bool) -> PlannedColumn:
    kind = spec.kind
    nested = kind in (ValueKind.NESTED, ValueKind.NESTED_JSON)
    if kind is ValueKind.BINARY:
        return PlannedColumn("data", "data_base64", _b64)
    if kind is ValueKind.FLAT_STRUCT:
        return PlannedColumn("data", "data", _without_null_fields if ignore_null_fields else None)
    if nested and ignore_null_fields:
        return PlannedColumn("data", "data", _json_without_null_fields)
    if kind in (ValueKind.STRING, ValueKind.INTEGER, ValueKind.BOOLEAN, ValueKind.NESTED_JSON):
        return PlannedColumn("data", "data", None)
    if kind in (ValueKind.FLOAT, ValueKind.NESTED, ValueKind.TIMESTAMP, ValueKind.DATE):
        return PlannedColumn("data", "data", json_value)
    raise SchemaError(f"column 'data' has an unsupported type ({kind.value}); cast it to string or binary")


def _require(spec: ColumnSpec, kinds: set[ValueKind], what: str) -> None:
    if spec.kind not in kinds:
        raise SchemaError(f"column {spec.name!r} must be {what}, not {spec.kind.value}: cast it first")


def _reject_corrupt(value: Any) -> Any:
    raise ce.InvalidValue("malformed input record: the reader could not parse this line")


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _without_null_fields(value: dict[str, Any]) -> dict[str, Any]:
    if None in value.values():
        return {k: v for k, v in value.items() if v is not None}
    return value


def _json_without_null_fields(value: Any) -> Any:
    return json_value(value, drop_null_fields=True)


def json_value(value: Any, *, strict: bool = True, drop_null_fields: bool = False) -> Any:
    """``value`` (as Arrow's ``to_pylist`` gives it) as a JSON value: timestamps become RFC 3339
    strings, binary base64, decimals numbers, maps objects. With ``strict``, a NaN or infinite
    float raises :class:`InvalidValue` (JSON has no such numbers); otherwise it becomes a string,
    which is how rejected rows are recorded. ``drop_null_fields`` leaves null struct fields out."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if strict:
            raise ce.InvalidValue(f"{value} is not a JSON number")
        return str(value)
    if isinstance(value, dict):
        return {
            str(k): json_value(v, strict=strict, drop_null_fields=drop_null_fields)
            for k, v in value.items()
            if v is not None or not drop_null_fields
        }
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):  # Arrow renders a map as (key, value) pairs
            return {str(k): json_value(v, strict=strict, drop_null_fields=drop_null_fields) for k, v in value}
        return [json_value(v, strict=strict, drop_null_fields=drop_null_fields) for v in value]
    if isinstance(value, dt.datetime):
        return ce.format_timestamp(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return _b64(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)
