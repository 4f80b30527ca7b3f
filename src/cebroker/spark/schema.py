"""Classify a Spark schema's columns into the value kinds the event conversion understands."""

from __future__ import annotations

from pyspark.sql import types as T

from cebroker.spark.columns import ColumnSpec, ValueKind

_SIMPLE: dict[type[T.DataType], ValueKind] = {
    T.StringType: ValueKind.STRING,
    T.VarcharType: ValueKind.STRING,
    T.CharType: ValueKind.STRING,
    T.ByteType: ValueKind.INTEGER,
    T.ShortType: ValueKind.INTEGER,
    T.IntegerType: ValueKind.INTEGER,
    T.LongType: ValueKind.INTEGER,
    T.BooleanType: ValueKind.BOOLEAN,
    T.FloatType: ValueKind.FLOAT,
    T.DoubleType: ValueKind.FLOAT,
    T.DecimalType: ValueKind.FLOAT,
    T.TimestampType: ValueKind.TIMESTAMP,
    T.TimestampNTZType: ValueKind.TIMESTAMP,
    T.DateType: ValueKind.DATE,
    T.BinaryType: ValueKind.BINARY,
    # a JSON field that is null in every sampled line; its values are all None
    T.NullType: ValueKind.STRING,
}
#: Leaf kinds that Arrow's ``to_pylist`` already renders as JSON values.
_JSON_NATIVE = frozenset({ValueKind.STRING, ValueKind.INTEGER, ValueKind.BOOLEAN})


def column_specs(schema: T.StructType) -> list[ColumnSpec]:
    """One :class:`ColumnSpec` per top-level field of ``schema``."""
    return [ColumnSpec(field.name, kind_of(field.dataType)) for field in schema.fields]


def kind_of(data_type: T.DataType) -> ValueKind:
    """The value kind of a Spark data type (nested types by their leaves)."""
    simple = _SIMPLE.get(type(data_type))
    if simple is not None:
        return simple
    if isinstance(data_type, T.StructType) and all(
        _SIMPLE.get(type(f.dataType)) in _JSON_NATIVE for f in data_type.fields
    ):
        return ValueKind.FLAT_STRUCT
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        leaves = _leaf_kinds(data_type)
        if isinstance(data_type, T.MapType) or _has_map(data_type) or not leaves <= _JSON_NATIVE:
            return ValueKind.NESTED
        return ValueKind.NESTED_JSON
    return ValueKind.OTHER


def _leaf_kinds(data_type: T.DataType) -> set[ValueKind]:
    if isinstance(data_type, T.StructType):
        return set().union(*(_leaf_kinds(f.dataType) for f in data_type.fields))
    if isinstance(data_type, T.ArrayType):
        return _leaf_kinds(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _leaf_kinds(data_type.keyType) | _leaf_kinds(data_type.valueType)
    return {_SIMPLE.get(type(data_type), ValueKind.OTHER)}


def _has_map(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.MapType):
        return True
    if isinstance(data_type, T.StructType):
        return any(_has_map(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _has_map(data_type.elementType)
    return False
