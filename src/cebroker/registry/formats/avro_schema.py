"""Apache Avro schemas: valid for both the reference parser (``avro``: strict about structure,
e.g. a record needs fields, a union no duplicate branch) and ``fastavro`` (default values of
the right type, and the compiled form events are checked with); compared by Avro's schema
resolution rules; event data read in the binary or the JSON encoding.

Schema resolution (a reader schema R reading data written with W), at each place both describe:

* primitive types are equal, or W's is promoted to R's (``int`` to ``long``, ``float`` or
  ``double``; ``long`` to ``float`` or ``double``; ``float`` to ``double``; ``string`` and
  ``bytes`` either way);
* records, enums and fixed types have the same name (or R lists W's name among its aliases);
  a field of R that W lacks needs a ``default``; fields of W that R lacks are skipped;
* every symbol of W's enum is one of R's, unless R has a ``default`` symbol;
* fixed types have the same size; arrays and maps compare their items and values;
* every branch of a union W writes must resolve to R (or to one of R's branches); a union R
  takes a non-union W when one branch resolves.
"""

from __future__ import annotations

import io
import json
from typing import Any

import avro.schema
import fastavro
import fastavro.validation

from cebroker.registry.formats import Break, Problem
from cebroker.registry.formats.json_schema import parse

_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
_NAMED = ("record", "error", "enum", "fixed")


def _parsed(document: bytes) -> tuple[Any, list[Problem]]:
    schema, problem = parse(document)
    if problem is not None:
        return None, [problem]
    try:
        avro.schema.parse(json.dumps(schema))
    except Exception as exc:  # the parser's boundary: anything it raises means "not a schema"
        return None, [Problem("", f"not an Avro schema: {exc}")]
    try:
        return fastavro.parse_schema(schema), []
    except Exception as exc:  # the same for the second parser
        return None, [Problem("", f"not an Avro schema: {exc}")]


class AvroFormat:
    """Apache Avro (``Avro/1.x``)."""

    family = "avro"

    def problems(self, document: bytes, version: str) -> list[Problem]:
        """Why the parsers refuse ``document``."""
        return _parsed(document)[1]

    def breaks(self, reader: bytes, writer: bytes, version: str) -> list[Break]:
        """The schema-resolution failures of ``reader`` reading ``writer``'s data."""
        r, _ = _parsed(reader)
        w, _ = _parsed(writer)
        if r is None or w is None:
            return []
        out: list[Break] = []
        _Resolver(_names(r), _names(w), out).compare(r, w, "", "")
        return out

    def checker(self, document: bytes, version: str, fragment: str) -> AvroChecker:
        """The compiled schema; ``fragment`` may name one of its named types."""
        schema, problems = _parsed(document)
        if problems:
            raise ValueError(problems[0].reason)
        if fragment:
            named = _names(schema)
            if fragment not in named:
                raise ValueError(f"the schema defines no type named {fragment!r}")
            schema = fastavro.parse_schema(named[fragment], named_schemas=dict(named))
        return AvroChecker(schema)


class AvroChecker:
    """Event data against one parsed Avro schema: bytes in the binary encoding, JSON in Avro's
    JSON encoding (``application/avro+json``, or any JSON data)."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema

    def problems(self, data: Any, binary: bytes | None, contenttype: str) -> list[Problem]:
        """Why the data cannot be read with the schema."""
        if binary is None and isinstance(data, str) and contenttype.endswith("avro"):
            binary = data.encode("latin-1", "replace")
        if binary is not None:
            return self._binary(binary)
        try:
            records = list(fastavro.json_reader(io.StringIO(json.dumps(data)), self.schema))
            fastavro.validation.validate(records[0], self.schema, raise_errors=True)
        except fastavro.validation.ValidationError as exc:
            return [Problem("", f"does not match the Avro schema: {'; '.join(map(str, exc.errors))}")]
        except Exception as exc:  # the decoder's boundary: anything it raises means "not readable"
            return [Problem("", f"not Avro JSON encoding of the schema: {exc or type(exc).__name__}")]
        return []

    def _binary(self, data: bytes) -> list[Problem]:
        stream = io.BytesIO(data)
        try:
            fastavro.schemaless_reader(stream, self.schema, None)
        except Exception as exc:  # the decoder's boundary
            return [Problem("", f"not Avro binary encoding of the schema: {exc or type(exc).__name__}")]
        if stream.tell() != len(data):
            return [Problem("", f"{len(data) - stream.tell()} bytes left over after the Avro datum")]
        return []


def _names(schema: Any) -> dict[str, Any]:
    """The named types of a parsed schema (fastavro keeps them with the parsed schema)."""
    if isinstance(schema, dict):
        named = schema.get("__named_schemas")
        if isinstance(named, dict):
            return named
    found: dict[str, Any] = {}
    _collect(schema, found)
    return found


def _collect(schema: Any, found: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, found)
    elif isinstance(schema, dict):
        if schema.get("type") in _NAMED and isinstance(schema.get("name"), str):
            found[schema["name"]] = schema
        for field in schema.get("fields", []) or []:
            _collect(field.get("type"), found)
        for key in ("items", "values"):
            if key in schema:
                _collect(schema[key], found)


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema.get("type")
        return "record" if kind == "error" else str(kind)
    return str(schema)


class _Resolver:
    def __init__(self, rnames: dict[str, Any], wnames: dict[str, Any], out: list[Break]) -> None:
        self.rnames = rnames
        self.wnames = wnames
        self.out = out
        self.seen: set[tuple[str, str]] = set()

    def _deref(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema in names:
            return names[schema]
        if isinstance(schema, dict) and schema.get("type") not in (*_NAMED, "array", "map"):
            return schema.get("type")  # {"type": "int", ...}: the primitive (logical types aside)
        return schema

    def resolves(self, r: Any, w: Any) -> bool:
        """Whether ``w`` resolves to ``r`` (without recording why not)."""
        probe = _Resolver(self.rnames, self.wnames, [])
        probe.seen = set(self.seen)
        probe.compare(r, w, "", "")
        return not probe.out

    def compare(self, r: Any, w: Any, rp: str, wp: str) -> None:
        r = self._deref(r, self.rnames)
        w = self._deref(w, self.wnames)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            for index, branch in enumerate(w):
                if rk == "union":
                    if not any(self.resolves(rb, branch) for rb in r):
                        self.out.append(
                            Break(
                                rp,
                                f"{wp}/{index}",
                                f"the writer's union branch {_kind(branch)!r} "
                                "matches no branch of the reader's union",
                            )
                        )
                else:
                    self.compare(r, branch, rp, f"{wp}/{index}")
            return
        if rk == "union":
            if not any(self.resolves(rb, w) for rb in r):
                self.out.append(Break(rp, wp, f"the writer's {wk!r} matches no branch of the reader's union"))
            return
        if rk != wk:
            if wk in _PROMOTIONS and rk in _PROMOTIONS[wk]:
                return
            self.out.append(Break(rp, wp, f"the reader's type {rk!r} cannot read the writer's {wk!r}"))
            return
        if rk in _NAMED or rk == "record":
            self._named(r, w, rp, wp, rk)
        elif rk == "array":
            self.compare(r.get("items"), w.get("items"), f"{rp}/items", f"{wp}/items")
        elif rk == "map":
            self.compare(r.get("values"), w.get("values"), f"{rp}/values", f"{wp}/values")

    def _named(self, r: dict[str, Any], w: dict[str, Any], rp: str, wp: str, kind: str) -> None:
        rname, wname = str(r.get("name")), str(w.get("name"))
        aliases = {str(a) for a in r.get("aliases", []) or []}
        if _short(rname) != _short(wname) and wname not in aliases and _short(wname) not in aliases:
            self.out.append(
                Break(f"{rp}/name", f"{wp}/name", f"the reader's {rname!r} is not the writer's {wname!r}")
            )
            return
        if (rname, wname) in self.seen:
            return  # a recursive type, already being compared
        self.seen.add((rname, wname))
        if kind == "fixed" and r.get("size") != w.get("size"):
            self.out.append(
                Break(f"{rp}/size", f"{wp}/size", f"size {r.get('size')} cannot read size {w.get('size')}")
            )
        elif kind == "enum":
            symbols = set(r.get("symbols", []))
            if "default" not in r:
                for index, symbol in enumerate(w.get("symbols", [])):
                    if symbol not in symbols:
                        self.out.append(
                            Break(
                                f"{rp}/symbols",
                                f"{wp}/symbols/{index}",
                                f"the writer's symbol {symbol!r} is unknown to the reader (no default)",
                            )
                        )
        elif kind == "record":
            self._fields(r, w, rp, wp)

    def _fields(self, r: dict[str, Any], w: dict[str, Any], rp: str, wp: str) -> None:
        wfields = {f["name"]: (i, f) for i, f in enumerate(w.get("fields", []))}
        for index, field in enumerate(r.get("fields", [])):
            names = [field["name"], *(field.get("aliases") or [])]
            match = next((wfields[n] for n in names if n in wfields), None)
            where = f"{rp}/fields/{index}"
            if match is None:
                if "default" not in field:
                    self.out.append(
                        Break(
                            where,
                            f"{wp}/fields",
                            f"the reader's field {field['name']!r} has no default and the writer lacks it",
                        )
                    )
                continue
            windex, wfield = match
            self.compare(field["type"], wfield["type"], f"{where}/type", f"{wp}/fields/{windex}/type")


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]
