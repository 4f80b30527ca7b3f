"""JSON Schema documents: valid against their dialect's meta-schema, and the rules that say
which changes between two versions break a reader.

The dialect is the document's ``$schema`` when it names one, else the format's version
(``JsonSchema/draft-07`` -> draft 7; ``draft-04``, ``draft-06``, ``draft/2019-09``,
``draft/2020-12``), else 2020-12. Every dialect the ``jsonschema`` library knows is accepted.

Compatibility (a reader schema R reading data written under a writer schema W, at each place
both describe; see docs/registry.md, which lists the same rules):

* ``type``: every type W allows must be allowed by R (``integer`` is a ``number``); R naming a
  type where W names none breaks;
* ``required``: a name R requires must be required by W;
* ``properties``: a property W declares that R does not is refused by R when R's
  ``additionalProperties`` is ``false``; properties both declare are compared recursively;
  ``items`` too;
* ``additionalProperties``: R ``false`` breaks unless W is ``false`` too;
* ``enum``/``const``: every value W allows must be in R's ``enum`` (R with an ``enum`` and W
  without one breaks);
* numeric and size bounds (``minimum``, ``exclusiveMinimum``, ``minLength``, ``minItems``,
  ``minProperties`` and their maxima): R's lower bound may not be above W's, nor R's upper
  bound below W's (R with a bound W lacks breaks), where W can write values the bound applies
  to.

A property R declares that W does not is accepted (the common "add an optional property"
change), although a writer that allowed additional properties could have sent that name with
another shape: the rules judge declared structure, not every document a schema admits.
Keywords outside this list (``pattern``, ``oneOf``, ``$ref``, ...) are not compared.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from cefilters.errors import pointer_token
from ceprotocols import jsontext

from cebroker.registry.formats import Break, Problem

#: at most this many meta-schema violations are reported for one document
MAX_PROBLEMS = 50

_DRAFTS: dict[str, type[Any]] = {
    "draft-03": jsonschema.Draft3Validator,
    "draft-04": jsonschema.Draft4Validator,
    "draft-06": jsonschema.Draft6Validator,
    "draft-07": jsonschema.Draft7Validator,
    "draft/2019-09": jsonschema.Draft201909Validator,
    "draft-2019-09": jsonschema.Draft201909Validator,
    "draft/2020-12": jsonschema.Draft202012Validator,
    "draft-2020-12": jsonschema.Draft202012Validator,
}
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
#: the types each bound applies to (a bound on values the writer never writes breaks nothing)
_APPLIES = {
    "minimum": {"number", "integer"},
    "exclusiveMinimum": {"number", "integer"},
    "maximum": {"number", "integer"},
    "exclusiveMaximum": {"number", "integer"},
    "minLength": {"string"},
    "maxLength": {"string"},
    "minItems": {"array"},
    "maxItems": {"array"},
    "minProperties": {"object"},
    "maxProperties": {"object"},
}


def _pointer(path: Any) -> str:
    return "".join(f"/{pointer_token(p)}" for p in path)


def parse(document: bytes) -> tuple[Any, Problem | None]:
    """The JSON of ``document`` within the input limits, or the problem reading it."""
    try:
        return jsontext.loads(document), None
    except jsontext.JsonTextError as exc:
        return None, Problem("", f"not JSON within the input limits: {exc}")


class JsonSchemaFormat:
    """JSON Schema (every draft the ``jsonschema`` library knows)."""

    family = "jsonschema"

    def problems(self, document: bytes, version: str) -> list[Problem]:
        """Meta-schema violations of ``document`` (each with its pointer)."""
        schema, problem = parse(document)
        if problem is not None:
            return [problem]
        if not isinstance(schema, dict | bool):
            return [Problem("", "a JSON Schema is an object or a boolean")]
        if isinstance(schema, dict) and "$schema" in schema:
            dialect = schema["$schema"]
            if not isinstance(dialect, str):
                return [Problem("/$schema", "must be a string naming a JSON Schema dialect")]
            cls = jsonschema.validators.validator_for(schema, default=None)
            if cls is None:
                return [Problem("/$schema", "names no JSON Schema dialect this registry knows")]
        elif version and version not in _DRAFTS:
            return [Problem("", f"unknown JSON Schema version {version!r}; one of {', '.join(_DRAFTS)}")]
        else:
            cls = _DRAFTS.get(version, jsonschema.Draft202012Validator)
        meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
        found = []
        for error in meta.iter_errors(schema):
            found.append(Problem(_pointer(error.absolute_path), error.message))
            if len(found) >= MAX_PROBLEMS:
                break
        return found

    def breaks(self, reader: bytes, writer: bytes, version: str) -> list[Break]:
        """The rule violations listed in the module docstring."""
        r, _ = parse(reader)
        w, _ = parse(writer)
        out: list[Break] = []
        _compare(r, w, "", "", out)
        return out


def _types(schema: dict[str, Any]) -> set[str] | None:
    value = schema.get("type")
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {str(t) for t in value}
    return None


def _compare(r: Any, w: Any, rp: str, wp: str, out: list[Break]) -> None:
    if w is False or r is True or not isinstance(r, dict):
        return  # nothing written, or a reader that takes anything
    if not isinstance(w, dict):
        w = {}  # the writer takes anything (true)
    _compare_types(r, w, rp, wp, out)
    _compare_enum(r, w, rp, wp, out)
    _compare_bounds(r, w, rp, wp, out)
    _compare_objects(r, w, rp, wp, out)
    if isinstance(r.get("items"), dict | bool) and "items" in w:
        _compare(r["items"], w["items"], f"{rp}/items", f"{wp}/items", out)
    elif isinstance(r.get("items"), dict) and r["items"] and "items" not in w:
        out.append(Break(f"{rp}/items", wp, "the reader constrains array items the writer leaves open"))


def _compare_types(r: dict[str, Any], w: dict[str, Any], rp: str, wp: str, out: list[Break]) -> None:
    rt, wt = _types(r), _types(w)
    if rt is None:
        return
    if wt is None:
        out.append(Break(f"{rp}/type", wp, f"the reader requires type {sorted(rt)}; the writer allows any"))
        return
    missing = {t for t in wt if t not in rt and not (t == "integer" and "number" in rt)}
    if missing:
        out.append(
            Break(
                f"{rp}/type",
                f"{wp}/type",
                f"the writer allows type {sorted(missing)}, which the reader ({sorted(rt)}) refuses",
            )
        )


def _allowed_values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _compare_enum(r: dict[str, Any], w: dict[str, Any], rp: str, wp: str, out: list[Break]) -> None:
    rv = _allowed_values(r)
    if rv is None:
        return
    where = f"{rp}/{'const' if 'const' in r else 'enum'}"
    wv = _allowed_values(w)
    if wv is None:
        out.append(Break(where, wp, "the reader allows only listed values; the writer allows any"))
        return
    extra = [v for v in wv if v not in rv]
    if extra:
        wwhere = f"{wp}/{'const' if 'const' in w else 'enum'}"
        out.append(Break(where, wwhere, f"the writer allows {extra!r}, which the reader refuses"))


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _compare_bounds(r: dict[str, Any], w: dict[str, Any], rp: str, wp: str, out: list[Break]) -> None:
    written = _types(w)
    for keyword in (*_LOWER, *_UPPER):
        rb = _number(r.get(keyword))
        if rb is None or (written is not None and not written & _APPLIES[keyword]):
            continue
        wb = _number(w.get(keyword))
        lower = keyword in _LOWER
        if wb is None:
            out.append(Break(f"{rp}/{keyword}", wp, f"the reader sets {keyword} {rb:g}; the writer none"))
        elif (lower and rb > wb) or (not lower and rb < wb):
            out.append(
                Break(
                    f"{rp}/{keyword}",
                    f"{wp}/{keyword}",
                    f"the reader's {keyword} {rb:g} refuses values the writer's {wb:g} allows",
                )
            )


def _compare_objects(r: dict[str, Any], w: dict[str, Any], rp: str, wp: str, out: list[Break]) -> None:
    wreq: list[Any] = w["required"] if isinstance(w.get("required"), list) else []
    rreq: list[Any] = r["required"] if isinstance(r.get("required"), list) else []
    for index, name in enumerate(rreq):
        if name not in wreq:
            out.append(
                Break(
                    f"{rp}/required/{index}",
                    f"{wp}/required" if "required" in w else wp,
                    f"the reader requires {name!r}, which the writer does not",
                )
            )
    rprops: dict[str, Any] = r["properties"] if isinstance(r.get("properties"), dict) else {}
    wprops: dict[str, Any] = w["properties"] if isinstance(w.get("properties"), dict) else {}
    closed = r.get("additionalProperties") is False
    for name, wsub in wprops.items():
        token = pointer_token(name)
        if name in rprops:
            _compare(rprops[name], wsub, f"{rp}/properties/{token}", f"{wp}/properties/{token}", out)
        elif closed:
            out.append(
                Break(
                    f"{rp}/additionalProperties",
                    f"{wp}/properties/{token}",
                    f"the writer may send {name!r}, which the reader does not allow",
                )
            )
    if closed and w.get("additionalProperties") is not False:
        out.append(
            Break(
                f"{rp}/additionalProperties",
                f"{wp}/additionalProperties" if "additionalProperties" in w else wp,
                "the reader refuses properties it does not declare; the writer allows them",
            )
        )
