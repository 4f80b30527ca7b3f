"""Schema formats the registry reads: which format a ``format`` value names, and what each
format does with a document (check it, compare two versions, check event data against it).

A format value is matched case-insensitively, spaces ignored, with or without its version
suffix: ``JsonSchema/draft-07``, ``json-schema``, ``Avro/1.9``, ``avro``, ``Protobuf/3``,
``proto2``, ``XSD/1.1``, ``xsd11``, ``XMLSchema/1.0``. A value naming none of them is a format
the registry does not know: its documents are stored unchecked (and say so).

Every format is a :class:`SchemaFormat`; :class:`Formats` holds one of each for a registry
(with their caches: nothing here is process-global).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a document is not valid in its format: where in it (a JSON Pointer for JSON
    documents, ``""`` for the whole document) and the parser's reason."""

    pointer: str
    reason: str


@dataclass(frozen=True, slots=True)
class Break:
    """One change that breaks a reader of data written with another version: the place in the
    reader's document, the place in the writer's, and why."""

    reader: str
    writer: str
    reason: str


@dataclass(frozen=True, slots=True)
class FormatName:
    """A ``format`` value, parsed: the family (``jsonschema``, ``avro``, ``protobuf``, ``xsd``)
    and the version suffix as given (lower case, may be empty)."""

    family: str
    version: str


class DataChecker(Protocol):
    """Checks event data against one compiled schema."""

    def problems(self, data: Any, binary: bytes | None, contenttype: str) -> list[Problem]:
        """Why the event's data does not conform: ``data`` is the JSON value (or text) the event
        carries, ``binary`` its bytes when the event carries bytes (``data_base64``), and
        ``contenttype`` its ``datacontenttype`` (lower case, parameters removed)."""
        ...


class SchemaFormat(Protocol):
    """What the registry does with the documents of one format."""

    #: the family name (as :class:`FormatName` has it)
    family: str

    def problems(self, document: bytes, version: str) -> list[Problem]:
        """Why ``document`` is not a valid schema of this format (empty when it is)."""
        ...

    def breaks(self, reader: bytes, writer: bytes, version: str) -> list[Break]:
        """Every change that keeps a reader using ``reader`` from reading data written with
        ``writer`` (both valid documents of this format)."""
        ...


class DataFormat(SchemaFormat, Protocol):
    """A format whose schemas the registry compiles to check event data with (JSON Schema has
    its own, older path: :mod:`cebroker.registry.validation`)."""

    def checker(self, document: bytes, version: str, fragment: str) -> DataChecker:
        """A compiled form of ``document`` for checking event data; ``fragment`` (the part of a
        schema URI after ``#``, may be empty) selects a type inside it where the format has
        several (a Protobuf message, an Avro named type)."""
        ...


_FAMILIES = (
    ("jsonschema", "jsonschema"),
    ("json-schema", "jsonschema"),
    ("avro", "avro"),
    ("protobuf", "protobuf"),
    ("proto", "protobuf"),
    ("xmlschema", "xsd"),
    ("xsd", "xsd"),
)


def parse_format(value: Any) -> FormatName | None:
    """The format a ``format``/``dataschemaformat`` value names, or None when it names none the
    registry knows (or is not a string)."""
    if not isinstance(value, str):
        return None
    text = value.lower().replace(" ", "")
    for prefix, family in _FAMILIES:
        if text.startswith(prefix):
            rest = text[len(prefix) :].lstrip("/-_")
            return FormatName(family, rest)
    return None
