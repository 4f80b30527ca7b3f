"""The formats one registry knows, each with its own caches (one :class:`Formats` per registry,
nothing shared between registries or kept process-wide)."""

from __future__ import annotations

from cebroker.registry.formats import DataFormat, SchemaFormat
from cebroker.registry.formats.avro_schema import AvroFormat
from cebroker.registry.formats.json_schema import JsonSchemaFormat
from cebroker.registry.formats.proto_schema import ProtobufFormat
from cebroker.registry.formats.xml_schema import XsdFormat

#: families whose compatibility rules are defined (XSD has none)
WITH_RULES = frozenset({"jsonschema", "avro", "protobuf"})


class Formats:
    """JSON Schema, Avro, Protobuf and XSD, by family name."""

    def __init__(self) -> None:
        self.jsonschema = JsonSchemaFormat()
        self.avro = AvroFormat()
        self.protobuf = ProtobufFormat()
        self.xsd = XsdFormat()
        self._data: dict[str, DataFormat] = {"avro": self.avro, "protobuf": self.protobuf, "xsd": self.xsd}
        self._all: dict[str, SchemaFormat] = {"jsonschema": self.jsonschema, **self._data}

    def get(self, family: str) -> SchemaFormat:
        """The format of ``family`` (one :func:`~cebroker.registry.formats.parse_format` returns)."""
        return self._all[family]

    def data(self, family: str) -> DataFormat | None:
        """The format that compiles ``family``'s schemas for event checks (None for JSON Schema,
        which :mod:`cebroker.registry.validation` checks itself)."""
        return self._data.get(family)
