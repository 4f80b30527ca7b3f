"""Event data in the formats other than JSON Schema: Avro (binary or JSON encoding), Protobuf
(binary or the JSON mapping) and XML against XSD.

A message definition's data schema is found as for JSON Schema (inline ``dataschema``, or
``dataschemauri`` resolved in this registry, a resource meaning its default version); its format
is the definition's ``dataschemaformat``, else the ``format`` of the schema version (or group)
the URI names. The encoding is the event's: bytes (``data_base64``: binary Avro or Protobuf, or
XML bytes), text (``data`` as a string: XML), or JSON (``data`` as a JSON value: Avro's JSON
encoding, Protobuf's JSON mapping). A URI fragment names the type to check against where the
schema has several (a Protobuf message ``#shop.Order``, an Avro named type ``#com.example.Order``);
without one, the first message of a ``.proto`` and the top-level Avro schema are used.

Compiled schemas are kept in a :class:`CompiledSchemas` (one per registry), keyed by the
document's hash. A :class:`LazyChecker` compiles on first use: the definition index calls it
while it is built (on the storage's thread) when events are checked, and never otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ceprotocols.errors import BindingError
from ceprotocols.eventform import payload_of

from cebroker.contracts import Event, Violation
from cebroker.registry.formats import DataChecker, FormatName, parse_format
from cebroker.registry.formats.catalog import Formats
from cebroker.registry.views import Tree
from cebroker.storage.registry import Row

log = logging.getLogger("cebroker.registry")

#: compiled schemas kept (each a few kilobytes to a few hundred)
CACHE_SIZE = 512


class CompiledSchemas:
    """Compiled data schemas by (format, fragment, document hash); safe to share between the
    threads that rebuild the definition index."""

    def __init__(self, formats: Formats) -> None:
        self.formats = formats
        self._cache: OrderedDict[tuple[str, str, str, bytes], DataChecker | None] = OrderedDict()
        self._lock = threading.Lock()

    def checker(self, name: FormatName, document: bytes, fragment: str, owner: str) -> DataChecker | None:
        """The compiled ``document`` (None when the format has no data checks here, or the
        schema does not compile: then data is not checked, and the warning names ``owner``)."""
        fmt = self.formats.data(name.family)
        if fmt is None:
            return None
        key = (name.family, name.version, fragment, hashlib.sha256(document).digest())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        compiled: DataChecker | None
        try:
            compiled = fmt.checker(document, name.version, fragment)
        except Exception as exc:  # the schema's compilers are the boundary: any refusal means "unusable"
            compiled = None
            log.warning("data schema of %s does not compile, data is not checked: %s", owner, exc)
        with self._lock:
            self._cache[key] = compiled
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return compiled


@dataclass(eq=False)
class LazyChecker:
    """A data schema compiled on the first event that needs it (an index rebuild, e.g. at start
    or with validation off, compiles nothing); two are equal when they name the same document,
    format and fragment, so that an unchanged definition keeps its compiled schema."""

    compiled: CompiledSchemas
    name: FormatName
    document: bytes
    fragment: str
    owner: str
    _checker: DataChecker | None = None
    _done: bool = False

    def get(self) -> DataChecker | None:
        """The compiled schema (None when it does not compile)."""
        if not self._done:
            self._checker = self.compiled.checker(self.name, self.document, self.fragment, self.owner)
            self._done = True
        return self._checker

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyChecker):
            return NotImplemented
        return (self.name, self.document, self.fragment) == (other.name, other.document, other.fragment)

    def __hash__(self) -> int:
        return hash((self.name, self.document, self.fragment))


def schema_version(tree: Tree, uri: str, base: str) -> tuple[Row | None, str]:
    """The schema version a ``dataschemauri`` names in this registry, and its fragment."""
    path, _, fragment = uri[1:].partition("#") if uri.startswith("#/") else uri.partition("#")
    if path.startswith(base + "/"):
        path = path[len(base) :]
    path = path.removesuffix("$details").rstrip("/")
    row = tree.rows.get(path)
    if row is not None and row.kind == "resource":
        row = tree.default_version(row)
    if row is None or row.kind != "version" or not row.xid.startswith("/schemagroups/"):
        return None, fragment
    return row, fragment


def data_format(msg: Mapping[str, Any], tree: Tree, base: str) -> tuple[FormatName | None, bytes | None, str]:
    """The format, document and fragment of a definition's data schema (None, None when it
    has none this module checks)."""
    name = parse_format(msg.get("dataschemaformat"))
    uri = msg.get("dataschemauri")
    if isinstance(uri, str):
        row, fragment = schema_version(tree, uri, base)
        if row is None:
            return name, None, ""
        if name is None:
            group = tree.rows.get(row.xid.split("/schemas/", 1)[0])
            name = parse_format(row.attrs.get("format") or (group.attrs.get("format") if group else None))
        return name, row.doc, fragment
    inline = msg.get("dataschema")
    if isinstance(inline, str):
        return name, inline.encode("utf-8"), ""
    if inline is not None:
        return name, json.dumps(inline).encode("utf-8"), ""
    return name, None, ""


def check_data(checker: DataChecker, event: Event) -> list[Violation]:
    """The violations of the event's data (``/data`` or ``/data_base64``)."""
    if "data" not in event and "data_base64" not in event:
        return []
    contenttype = str(event.get("datacontenttype") or "").split(";")[0].strip().lower()
    try:
        binary = payload_of(event) if event.get("data_base64") is not None else None
    except BindingError as exc:
        return [Violation("/data_base64", str(exc))]
    where = "/data_base64" if binary is not None else "/data"
    return [
        Violation(where + p.pointer, p.reason)
        for p in checker.problems(event.get("data"), binary, contenttype)
    ]
