"""Checking events against the registry's message definitions (an :class:`EventValidator`).

An event's definition is found by its ``type``: a message whose ``messageid`` equals it, else
one whose ``envelopemetadata.type.value`` does. The definition (with its ``basemessage``
chain merged in) is then checked: required attributes, fixed values (placeholders of URI
templates match anything, and one placeholder name binds one value across attributes),
attribute types, and ``data`` against the JSON Schema given inline or by ``dataschemauri``
(resolved in this registry; a ``#/pointer`` fragment selects a sub-schema). When several
definitions share a type, the event conforms if it conforms to any of them. A schema's
references are followed only to this registry's own schemas (see
:mod:`cebroker.registry.schemarefs`): checking an event never opens a file or a connection.

The index is rebuilt on the registry's thread after each committed write and swapped in whole,
so ``validate`` never touches the database.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from cebroker.contracts import Event, EventValidator, Violation
from cebroker.registry.basemessage import resolve
from cebroker.registry.datachecks import CompiledSchemas, LazyChecker, check_data, data_format
from cebroker.registry.schemarefs import document_json, registry_retriever
from cebroker.registry.views import Tree
from cebroker.storage.registry import RegistryReader

log = logging.getLogger("cebroker.registry")

_REQUIRED = ("id", "type", "source")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_SYMBOL = re.compile(r"^[A-Za-z0-9_]+$")
_DURATION = re.compile(r"^-?P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+)\}")
_NOW = "0000-01-01T00:00:00Z"


def _type_ok(ptype: str, value: Any) -> bool:
    t = ptype.lower()
    if t == "any":
        return True
    if t == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None
        )
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if not isinstance(value, str):
        return False
    if t == "timestamp":
        return _RFC3339.match(value) is not None
    if t == "uri":
        return _URI.match(value) is not None
    if t == "symbol":
        return _SYMBOL.match(value) is not None
    if t == "duration":
        return _DURATION.match(value) is not None
    if t == "binary":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
    return True  # string, urireference, uritemplate


def template_regex(template: str) -> re.Pattern[str]:
    """A regex matching ``template`` with each ``{name}`` as a wildcard bound to a group."""
    out, pos, seen = [], 0, set()
    for m in _PLACEHOLDER.finditer(template):
        out.append(re.escape(template[pos : m.start()]))
        name = m.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("^" + "".join(out) + "$", re.DOTALL)


def _never_retrieve(uri: str) -> Any:
    raise ValueError("only references to this registry's JSON schemas are followed")


@dataclass(slots=True)
class Definition:
    """One message definition, materialized, with what checking an event needs."""

    xid: str
    metadata: dict[str, dict[str, Any]]
    schema: Any = None
    templates: dict[str, re.Pattern[str]] = field(default_factory=dict)
    #: ``dataschemaformat`` names JSON Schema draft-07 (used when the schema has no ``$schema``)
    draft7: bool = False
    #: the definition's URL: relative references in an inline schema resolve against it
    base_uri: str = ""
    #: serves this registry's schemas to the validator, and nothing else
    retriever: Callable[[str], Any] = _never_retrieve
    #: the data schema in another format (Avro, Protobuf, XSD; see datachecks), compiled on
    #: first use
    data_checker: LazyChecker | None = None
    _validator: Any = None
    _broken: bool = False

    def data_validator(self) -> Any:
        """The compiled JSON Schema of ``data`` (None without one, or when it does not compile)."""
        if self._validator is None and isinstance(self.schema, (dict, bool)) and not self._broken:
            options: dict[str, Any] = {"retriever": self.retriever}
            if self.base_uri:
                options["base_uri"] = self.base_uri
            try:
                if isinstance(self.schema, dict) and "$schema" not in self.schema and self.draft7:
                    self._validator = jsonschema_rs.Draft7Validator(self.schema, **options)
                else:
                    self._validator = jsonschema_rs.validator_for(self.schema, **options)
            except ValueError as exc:  # jsonschema_rs.ValidationError: the schema itself is invalid
                self._broken = True
                log.warning("data schema of %s does not compile, data is not checked: %s", self.xid, exc)
        return self._validator

    def check(self, event: Event) -> list[Violation]:
        """Every way ``event`` differs from this definition."""
        out: list[Violation] = []
        bindings: dict[str, str] = {}
        names = set(self.metadata) | set(_REQUIRED)
        for attr in sorted(names):
            decl = self.metadata.get(attr, {})
            required = attr in _REQUIRED or bool(decl.get("required", False))
            value = event.get(attr)
            if value is None:
                if required:
                    out.append(Violation(f"/{attr}", f"required by {self.xid}"))
                continue
            ptype = str(decl.get("type", "string"))
            if not _type_ok(ptype, value):
                out.append(Violation(f"/{attr}", f"must be of type {ptype}"))
                continue
            self._check_value(attr, decl, value, bindings, out)
        out.extend(self._check_data(event))
        return out

    def _check_value(
        self, attr: str, decl: Mapping[str, Any], value: Any, bindings: dict[str, str], out: list[Violation]
    ) -> None:
        if "value" not in decl or decl["value"] is None:
            return
        want = decl["value"]
        if attr in self.templates:
            m = self.templates[attr].match(str(value))
            if m is None:
                out.append(Violation(f"/{attr}", f"must match {want!r}"))
                return
            for name, got in m.groupdict().items():
                if bindings.setdefault(name, got) != got:
                    out.append(
                        Violation(f"/{attr}", f"placeholder {{{name}}} must be {bindings[name]!r} here")
                    )
            return
        if str(decl.get("type", "")).lower() == "timestamp" and want == _NOW:
            return  # "the current time" when producing: any timestamp conforms
        if value != want and str(value) != str(want):
            out.append(Violation(f"/{attr}", f"must be {want!r}"))

    def _check_data(self, event: Event) -> list[Violation]:
        checker = self.data_checker.get() if self.data_checker is not None else None
        if checker is not None:
            return check_data(checker, event)
        validator = self.data_validator()
        if validator is None or "data" not in event or validator.is_valid(event["data"]):
            return []
        return [
            Violation("/data" + "".join(f"/{p}" for p in err.instance_path), err.message)
            for err in validator.iter_errors(event["data"])
        ]


def _is_json_schema(fmt: Any, schema: Any) -> bool:
    if isinstance(fmt, str):
        return fmt.lower().replace(" ", "").startswith("jsonschema")
    return isinstance(schema, dict)


class DefinitionIndex:
    """Message definitions by event type, built from the store."""

    def __init__(self, by_type: dict[str, list[Definition]], schemas_key: int = 0) -> None:
        self.by_type = by_type
        #: fingerprint of every stored schema: compiled validators are reused only while it holds
        self.schemas_key = schemas_key

    @classmethod
    def build(
        cls,
        rows: RegistryReader,
        base_url: str,
        previous: DefinitionIndex | None = None,
        compiled: CompiledSchemas | None = None,
        *,
        warm: bool = False,
    ) -> DefinitionIndex:
        """Read every message and schema (runs on the storage's thread, in one read). Definitions
        equal to one in ``previous`` are reused, with their compiled data schemas, while no
        stored schema changed; data schemas in other formats come from ``compiled`` (None: not
        checked), compiled here when ``warm`` (this runs on the storage's thread: the first
        event that needs one then does not compile it on the event loop)."""
        tree = Tree(rows.rows_of_kind("resource") + rows.rows_of_kind("version"))
        base = base_url.rstrip("/")
        schemas_key = hash(
            tuple(
                (r.xid, r.doc, str(r.attrs.get("contenttype")), str(r.attrs.get("defaultversionid")))
                for r in tree.rows.values()
                if r.xid.startswith("/schemagroups/")
            )
        )
        reusable: dict[str, Definition] = {}
        if previous is not None and previous.schemas_key == schemas_key:
            reusable = {d.xid: d for ds in previous.by_type.values() for d in ds}
        loaded: dict[str, Any] = {}

        def lookup(xid: str) -> Any:
            if xid not in loaded:
                loaded[xid] = _load_schema(tree, xid)
            return loaded[xid]

        retriever = registry_retriever(base, lookup)
        message_rows = [r for r in tree.rows.values() if r.kind == "resource" and r.coll == "messages"]
        messages: dict[str, dict[str, Any]] = {}
        for res in message_rows:
            # a message with an xref is its target's definition under its own id
            xref = res.attrs.get("xref")
            source = tree.rows.get(xref) if isinstance(xref, str) else res
            default = tree.default_version(source) if source is not None else None
            if default is not None:
                messages[res.xid] = default.attrs
            for v in tree.children(res.xid, "versions"):
                messages[v.xid] = v.attrs

        def schema_at(uri: str) -> Any:
            # "#/schemagroups/..." is a document-view reference to an entity of this registry
            path, _, fragment = uri[1:].partition("#") if uri.startswith("#/") else uri.partition("#")
            if path.startswith(base + "/"):
                path = path[len(base) :]
            path = path.removesuffix("$details").rstrip("/")
            if lookup(path) is None:
                return None
            # The validator follows the reference through the retriever, fragment included.
            return {"$ref": base + path + (f"#{fragment}" if fragment else "")}

        by_type: dict[str, list[Definition]] = {}
        for res in message_rows:
            own = messages.get(res.xid)
            if own is None:
                continue
            msg = resolve(own, lambda ref: messages.get(ref.removeprefix(base)), res.xid)
            envelope = msg.get("envelope")
            if isinstance(envelope, str) and envelope.lower() != "cloudevents/1.0":
                continue
            metadata = {k: v for k, v in (msg.get("envelopemetadata") or {}).items() if isinstance(v, dict)}
            name, document, fragment = data_format(msg, tree, base)
            checker = None
            if name is not None and name.family != "jsonschema" and document is not None and compiled:
                checker = LazyChecker(compiled, name, document, fragment, res.xid)
            schema = msg.get("dataschema")
            if schema is None and isinstance(msg.get("dataschemauri"), str):
                schema = schema_at(msg["dataschemauri"])
            if not _is_json_schema(msg.get("dataschemaformat"), schema) or (
                name is not None and name.family != "jsonschema"
            ):
                schema = None
            draft7 = "draft-07" in str(msg.get("dataschemaformat", "")).lower()
            definition = reusable.get(res.xid)
            if definition is None or (
                definition.metadata,
                definition.schema,
                definition.draft7,
                definition.data_checker,
            ) != (metadata, schema, draft7, checker):
                definition = Definition(
                    res.xid,
                    metadata,
                    schema,
                    _templates(metadata),
                    draft7=draft7,
                    base_uri=base + res.xid,
                    retriever=retriever,
                    data_checker=checker,
                )
            keys = {res.eid}
            type_value = metadata.get("type", {}).get("value")
            if isinstance(type_value, str):
                keys.add(type_value)
            for key in keys:
                by_type.setdefault(key, []).append(definition)
        if warm:
            for definitions in by_type.values():
                for definition in definitions:
                    if definition.data_checker is not None:
                        definition.data_checker.get()
        return cls(by_type, schemas_key)


def _templates(metadata: Mapping[str, Mapping[str, Any]]) -> dict[str, re.Pattern[str]]:
    """Compiled patterns of the values that hold placeholders (``uritemplate`` or ``{name}``)."""
    return {
        attr: template_regex(str(d["value"]))
        for attr, d in metadata.items()
        if isinstance(d.get("value"), str)
        and (str(d.get("type", "")).lower() == "uritemplate" or _PLACEHOLDER.search(d["value"]))
    }


def _load_schema(tree: Tree, xid: str) -> Any:
    """The JSON document of a schema (its default version) or schema version, or None."""
    row = tree.rows.get(xid)
    if row is not None and row.kind == "resource":
        row = tree.default_version(row)
    if row is None or row.kind != "version" or not row.xid.startswith("/schemagroups/"):
        return None
    return document_json(row.doc, row.attrs.get("contenttype"))


class RegistryValidator:
    """The :class:`EventValidator` the ingress calls; see the module docstring."""

    def __init__(self) -> None:
        self.index = DefinitionIndex({})

    def validate(self, event: Event) -> list[Violation]:
        """Every violation of the event's definition; empty when it conforms or has none."""
        candidates = self.index.by_type.get(str(event.get("type", "")))
        if not candidates:
            return []
        best: list[Violation] | None = None
        for definition in candidates:
            found = definition.check(event)
            if not found:
                return []
            if best is None or len(found) < len(best):
                best = found
        return best or []


_: type[EventValidator] = RegistryValidator
