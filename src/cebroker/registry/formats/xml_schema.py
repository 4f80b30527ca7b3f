"""XML Schema documents (XSD 1.0, and 1.1 for ``XSD/1.1`` or ``xsd11``), read by ``xmlschema``
with every outside resource refused (no ``include``/``import`` of another location, no DTD
entity expansion): a schema is checked, and event data validated, from its own text only.
Compatibility rules are not defined for XSD: a policy other than ``none`` is not checked for
these schemas (the version says so in ``compatibilityvalidated``)."""

from __future__ import annotations

import io
from typing import Any

import xmlschema

from cebroker.registry.formats import Break, Problem

#: at most this many problems are reported for one document or event
MAX_PROBLEMS = 20


def _where(error: Any) -> str:
    line = getattr(error, "sourceline", None)
    path = getattr(error, "path", None)
    parts = [f"line {line}" if line else "", f"at {path}" if path else ""]
    return " ".join(p for p in parts if p)


def _schema(document: bytes, version: str, validation: str = "strict") -> Any:
    cls = xmlschema.XMLSchema11 if version.replace(".", "") == "11" else xmlschema.XMLSchema10
    return cls(io.BytesIO(document), allow="none", defuse="always", validation=validation)


class XsdFormat:
    """W3C XML Schema."""

    family = "xsd"

    def problems(self, document: bytes, version: str) -> list[Problem]:
        """Every error the schema reader finds."""
        try:
            schema = _schema(document, version, "lax")
        except xmlschema.XMLSchemaException as exc:
            return [Problem("", f"not an XML Schema: {getattr(exc, 'message', None) or exc}")]
        out = []
        for error in schema.all_errors[:MAX_PROBLEMS]:
            where = _where(error)
            out.append(Problem("", f"{error.message}{' (' + where + ')' if where else ''}"))
        return out

    def breaks(self, reader: bytes, writer: bytes, version: str) -> list[Break]:
        """No rules for XSD (see the module docstring)."""
        return []

    def checker(self, document: bytes, version: str, fragment: str) -> XsdChecker:
        """The compiled schema (``fragment`` is not used)."""
        return XsdChecker(_schema(document, version))


class XsdChecker:
    """XML event data (text, or bytes in ``data_base64``) against one schema."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema

    def problems(self, data: Any, binary: bytes | None, contenttype: str) -> list[Problem]:
        """Why the XML is not valid against the schema."""
        if binary is None:
            if not isinstance(data, str):
                return [Problem("", "XML data must be text")]
            binary = data.encode("utf-8")
        out = []
        try:
            for error in self.schema.iter_errors(io.BytesIO(binary)):
                out.append(Problem("", f"{error.reason or error.message} (at {error.path})"))
                if len(out) >= MAX_PROBLEMS:
                    break
        except xmlschema.XMLSchemaException as exc:
            return [Problem("", f"not XML: {getattr(exc, 'message', None) or exc}")]
        return out
