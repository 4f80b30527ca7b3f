"""Checks of definitions before a write commits.

Two layers, both reporting every problem found with a JSON Pointer into the document form
(``/messagegroups/<gid>/messages/<mid>/envelopemetadata``):

* built-in rules from the message, endpoint and schema specs (always on);
* an optional JSON Schema of the whole registry document (the spec's ``document-schema.json``
  for CloudEvents registries), configured by path; each written entity is wrapped into a
  one-entity document and validated against it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
from cefilters.errors import pointer_token

from cebroker.errors import ConfigurationError, FieldProblem

CLOUDEVENTS_ENVELOPE = "cloudevents/1.0"
PROPERTY_TYPES = frozenset(
    {
        "any",
        "binary",
        "boolean",
        "duration",
        "integer",
        "number",
        "string",
        "symbol",
        "timestamp",
        "uri",
        "urireference",
        "uritemplate",
    }
)
_IMPLICITLY_REQUIRED = ("id", "type", "source")
_USAGES = frozenset({"producer", "consumer", "subscriber"})
_DUAL_USAGE_PROTOCOLS = ("MQTT", "AMQP", "NATS")


def _p(problems: list[FieldProblem], pointer: str, message: str) -> None:
    problems.append(FieldProblem(pointer, message))


def check_message(msg: Mapping[str, Any], pointer: str, group_envelope: str | None) -> list[FieldProblem]:
    """Problems of one message definition (its stored, 1.0-rc2 attributes)."""
    out: list[FieldProblem] = []
    for name in (
        "envelope",
        "protocol",
        "dataschemaformat",
        "dataschemauri",
        "basemessage",
        "datacontenttype",
    ):
        if name in msg and not isinstance(msg[name], str):
            _p(out, f"{pointer}/{name}", "must be a string")
    envelope = msg.get("envelope")
    if isinstance(envelope, str) and group_envelope and envelope.lower() != group_envelope.lower():
        _p(out, f"{pointer}/envelope", f"must equal the group's envelope {group_envelope!r}")
    meta = msg.get("envelopemetadata")
    if envelope is not None and meta is None:
        _p(out, f"{pointer}/envelopemetadata", "is required when envelope is set")
    if meta is not None and not isinstance(meta, dict):
        _p(out, f"{pointer}/envelopemetadata", "must be an object")
    elif isinstance(meta, dict) and isinstance(envelope, str) and envelope.lower() == CLOUDEVENTS_ENVELOPE:
        _check_ce_metadata(meta, f"{pointer}/envelopemetadata", out)
    if "dataschema" in msg and "dataschemauri" in msg:
        _p(out, f"{pointer}/dataschema", "dataschema and dataschemauri are mutually exclusive")
    if ("dataschema" in msg or "dataschemauri" in msg) and "dataschemaformat" not in msg:
        _p(out, f"{pointer}/dataschemaformat", "is required with dataschema or dataschemauri")
    for name in ("envelopeoptions", "protocoloptions"):
        if name in msg and not isinstance(msg[name], dict):
            _p(out, f"{pointer}/{name}", "must be an object")
    return out


def _check_ce_metadata(meta: Mapping[str, Any], pointer: str, out: list[FieldProblem]) -> None:
    for attr, decl in meta.items():
        where = f"{pointer}/{attr}"
        if not isinstance(decl, dict):
            _p(out, where, "an attribute declaration must be an object")
            continue
        ptype = decl.get("type", "string")
        if not isinstance(ptype, str) or ptype.lower() not in PROPERTY_TYPES:
            _p(out, f"{where}/type", f"unknown type {ptype!r}; one of {', '.join(sorted(PROPERTY_TYPES))}")
        if "required" in decl and not isinstance(decl["required"], bool):
            _p(out, f"{where}/required", "must be a boolean")
        if attr in _IMPLICITLY_REQUIRED and decl.get("required") is False:
            _p(out, f"{where}/required", f"{attr} is always required and cannot be declared optional")
        if attr == "specversion" and "value" in decl and decl["value"] != "1.0":
            _p(out, f"{where}/value", "specversion is fixed to '1.0'")


def check_group(group: Mapping[str, Any], pointer: str) -> list[FieldProblem]:
    """Problems of a message or schema group's own attributes (their names are strings)."""
    out: list[FieldProblem] = []
    for name in ("envelope", "protocol", "format"):
        if name in group and not isinstance(group[name], str):
            _p(out, f"{pointer}/{name}", "must be a string")
    return out


def check_endpoint(ep: Mapping[str, Any], pointer: str) -> list[FieldProblem]:
    """Problems of one endpoint's attributes."""
    out: list[FieldProblem] = []
    usage = ep.get("usage")
    if usage is None:
        _p(out, f"{pointer}/usage", "is required")
    elif not isinstance(usage, list) or not usage or not all(isinstance(u, str) for u in usage):
        _p(out, f"{pointer}/usage", "must be a non-empty array of strings")
    else:
        bad = [u for u in usage if u not in _USAGES]
        if bad:
            _p(out, f"{pointer}/usage", f"unknown usage {bad[0]!r}; one of consumer, producer, subscriber")
        elif len(usage) > 1:
            protocol = str(ep.get("protocol", "")).upper()
            dual = sorted(usage) == ["consumer", "subscriber"]
            if not dual or not protocol.startswith(_DUAL_USAGE_PROTOCOLS):
                _p(
                    out,
                    f"{pointer}/usage",
                    "only one usage is allowed, except [subscriber, consumer] for MQTT, AMQP and NATS",
                )
    groups = ep.get("messagegroups")
    if groups is not None and (not isinstance(groups, list) or not all(isinstance(g, str) for g in groups)):
        _p(out, f"{pointer}/messagegroups", "must be an array of URIs")
    return out


def check_schema_version(
    version: Mapping[str, Any], pointer: str, group_format: str | None
) -> list[FieldProblem]:
    """Problems of one schema version's attributes."""
    out: list[FieldProblem] = []
    fmt = version.get("format")
    if fmt is None:
        pass  # the model marks it required, but a raw document upload has nowhere to carry it
    elif not isinstance(fmt, str):
        _p(out, f"{pointer}/format", "must be a string")
    elif group_format and fmt.lower() != group_format.lower():
        _p(out, f"{pointer}/format", f"must equal the group's format {group_format!r}")
    return out


class DocumentSchema:
    """A JSON Schema of whole registry documents, loaded once from a file (the one
    ``--registry-document-schema`` names).

    Raises:
        ConfigurationError: naming the flag and the file, when the file cannot be read or is not
            a JSON Schema (``cebroker serve`` refuses to start with this one-line message).
    """

    def __init__(self, path: Path) -> None:
        where = f"--registry-document-schema {path}"
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"{where}: cannot read it: {exc.strerror or exc}") from None
        except ValueError as exc:  # also the UnicodeDecodeError of a file that is not UTF-8
            raise ConfigurationError(f"{where}: not JSON: {exc}") from None
        # validator_for looks "$schema" up in the document: it needs an object (or a boolean)
        # whose "$schema", if any, is a string.
        dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
        if not isinstance(schema, dict | bool) or not isinstance(dialect, str):
            raise ConfigurationError(f"{where}: not a JSON Schema: expected an object (its $schema a string)")
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(f"{where}: not a JSON Schema: {exc.message}") from None
        self._validator = cls(schema)

    def problems(self, document: Mapping[str, Any]) -> list[FieldProblem]:
        """Every violation of the schema, with a pointer into ``document``."""
        out = []
        for err in self._validator.iter_errors(document):
            pointer = "".join(f"/{pointer_token(p)}" for p in err.absolute_path)
            out.append(FieldProblem(pointer, err.message))
        return out
