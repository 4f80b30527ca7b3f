"""Row-to-CloudEvent conversion, without Spark: column mapping, defaults, generated ids, rejects.

Rules checked: CloudEvents 1.0 core (required ``id``/``source``/``type``/``specversion``, attribute
naming ``[a-z0-9]{1,20}``, ``time`` as RFC 3339, Integer as signed 32-bit, extension types) and the
JSON event format (binary data as ``data_base64``, ``data``/``data_base64`` exclusive).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from cebroker.spark.columns import ColumnSpec, SchemaError, ValueKind, json_value, plan_columns
from cebroker.spark.events import EventBuilder

S, INT, TS, B, J, N = (
    ValueKind.STRING,
    ValueKind.INTEGER,
    ValueKind.TIMESTAMP,
    ValueKind.BINARY,
    ValueKind.NESTED_JSON,
    ValueKind.NESTED,
)


def build(
    specs: list[tuple[str, ValueKind]],
    rows: list[tuple[Any, ...]],
    *,
    source: str | None = "/src",
    type_: str | None = "t.default",
    start: int = 0,
) -> Any:
    plan = plan_columns([ColumnSpec(n, k) for n, k in specs], "_corrupt_record")
    builder = EventBuilder(plan, id_prefix="q:7:1:", default_source=source, default_type=type_)
    names = [n for n, _ in specs]
    columns = [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in specs]
    return builder.convert(names, columns, start)


def test_attributes_data_and_extensions_map_onto_the_event() -> None:
    """Core attributes keep their names, a struct becomes JSON ``data``, extensions pass through."""
    when = dt.datetime(2024, 5, 1, 12, 30, 0, 250000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    out = build(
        [("id", S), ("type", S), ("time", TS), ("subject", S), ("data", J), ("tenant", S), ("prio", INT)],
        [("e1", "com.example.order", when, "o-1", {"n": 1, "tags": ["a"]}, "acme", 3)],
    )
    assert out.rejected == []
    assert out.events == [
        {
            "specversion": "1.0",
            "id": "e1",
            "source": "/src",
            "type": "com.example.order",
            "time": "2024-05-01T10:30:00.250000Z",
            "subject": "o-1",
            "data": {"n": 1, "tags": ["a"]},
            "tenant": "acme",
            "prio": 3,
        }
    ]


def test_binary_data_becomes_data_base64_and_nulls_are_absent() -> None:
    """JSON format section 3.1: binary data travels as ``data_base64``; null attributes are absent."""
    out = build([("type", S), ("subject", S), ("data", B)], [("t", None, b"\x00\xffhi")])
    assert out.events[0]["data_base64"] == "AP9oaQ=="
    assert "data" not in out.events[0]
    assert "subject" not in out.events[0]


def test_rows_without_id_get_deterministic_ids_from_their_position() -> None:
    """Generated ids depend only on (query, batch, partition, position): a replay repeats them."""
    rows = [("a",), ("b",), ("c",)]
    first = build([("type", S)], rows, start=10)
    again = build([("type", S)], rows, start=10)
    assert [e["id"] for e in first.events] == ["q:7:1:10", "q:7:1:11", "q:7:1:12"]
    assert first.events == again.events
    assert first.positions == [10, 11, 12]


def test_invalid_rows_are_rejected_with_pointer_and_reason() -> None:
    """Invalid time, out-of-range Integer, empty type and a corrupt line each reject only their row."""
    out = build(
        [("type", S), ("time", S), ("count", INT), ("_corrupt_record", S)],
        [
            ("ok", "2024-01-01T00:00:00Z", 1, None),
            ("ok", "yesterday", 1, None),
            ("ok", None, 2**31, None),
            ("", None, None, None),
            (None, None, None, "{not json"),
        ],
    )
    assert [e["id"] for e in out.events] == ["q:7:1:0"]
    got = [(r.position, r.pointer) for r in out.rejected]
    assert got == [(1, "/time"), (2, "/count"), (3, "/type"), (4, None)]
    assert "RFC 3339" in out.rejected[0].reason
    assert "malformed" in out.rejected[3].reason
    assert out.rejected[3].row["_corrupt_record"] == "{not json"


def test_missing_required_attribute_without_default_is_rejected() -> None:
    """``source`` and ``type`` are REQUIRED (core spec 3.1); with no column value and no default the
    row is rejected, never sent."""
    out = build([("type", S)], [("t",), (None,)], source=None, type_=None)
    assert out.events == []
    assert [(r.position, r.pointer) for r in out.rejected] == [(0, "/source"), (1, "/source")]


def test_data_and_data_base64_together_are_rejected() -> None:
    """JSON format 3.1.1: ``data`` and ``data_base64`` are mutually exclusive."""
    out = build([("type", S), ("data", S), ("data_base64", S)], [("t", "x", "eA=="), ("t", None, "eA==")])
    assert [r.pointer for r in out.rejected] == ["/data_base64"]
    assert out.events[0]["data_base64"] == "eA=="


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([("userName", S)], "not a CloudEvents attribute name"),
        ([("thisnameiswaytoolongforce", S)], "not a CloudEvents attribute name"),
        ([("ratio", ValueKind.FLOAT)], "cast it"),
        ([("type", INT)], "must be a string"),
        ([("time", ValueKind.DATE)], "timestamp"),
        ([("data", ValueKind.OTHER)], "unsupported type"),
        ([("data", B), ("data_base64", S)], "both become 'data_base64'"),
    ],
)
def test_unmappable_schema_fails_before_any_row(specs: list[tuple[str, ValueKind]], message: str) -> None:
    """Columns no CloudEvent can hold fail the query at start, naming the column."""
    with pytest.raises(SchemaError, match=message):
        plan_columns([ColumnSpec(n, k) for n, k in specs], "_corrupt_record")


def test_json_value_converts_nested_leaves() -> None:
    """Nested timestamps, binary, decimals and Arrow map pairs become JSON values."""
    value = {
        "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "raw": b"hi",
        "price": Decimal("1.50"),
        "qty": Decimal("3"),
        "labels": [("k", "v")],
    }
    assert json_value(value) == {
        "at": "2024-01-01T00:00:00Z",
        "raw": "aGk=",
        "price": 1.5,
        "qty": 3,
        "labels": {"k": "v"},
    }


def test_non_finite_float_in_data_rejects_the_row() -> None:
    """JSON has no NaN: such a row is rejected instead of producing invalid JSON."""
    out = build([("type", S), ("data", N)], [("t", {"x": float("nan")}), ("t", {"x": 1.0})])
    assert [r.position for r in out.rejected] == [0]
    assert out.events[0]["data"] == {"x": 1.0}


def test_null_struct_fields_are_left_out_of_data_like_to_json() -> None:
    """A struct merged from JSON lines with different fields keeps only the fields a row has."""
    merged = {"seq": 3, "amount": None, "tags": [None, "x"]}
    kept = build([("type", S), ("data", J)], [("t", merged)])
    assert kept.events[0]["data"] == {"seq": 3, "tags": [None, "x"]}
    plan = plan_columns([ColumnSpec("data", J)], "_corrupt_record", ignore_null_fields=False)
    assert plan[0].convert is None


def test_flat_struct_data_drops_only_null_fields() -> None:
    """The flat-struct fast path gives the same JSON as the general conversion."""
    out = build(
        [("type", S), ("data", ValueKind.FLAT_STRUCT)],
        [("t", {"a": 1, "b": None}), ("t", {"a": 2, "b": "x"})],
    )
    assert [e["data"] for e in out.events] == [{"a": 1}, {"a": 2, "b": "x"}]
