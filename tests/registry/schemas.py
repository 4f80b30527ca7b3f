"""Schema documents of every format the registry checks, valid and invalid, shared by the
format, compatibility and event validation tests."""

from __future__ import annotations

import json

AVRO_ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "total", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}

PROTO3_ORDER = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  int32 total = 2;
  repeated string items = 3;
  google.protobuf.Timestamp at = 4;
}
"""

PROTO2_ORDER = """syntax = "proto2";
package shop;

message Order {
  required string id = 1;
  optional int32 total = 2;
}
"""

XSD_ORDER = """<?xml version="1.0"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:element name="order">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="id" type="xs:string"/>
        <xs:element name="total" type="xs:int"/>
      </xs:sequence>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""

#: XSD 1.1 only: an assertion (a 1.0 reader refuses xs:assert)
XSD11_ORDER = """<?xml version="1.0"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:element name="order">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="total" type="xs:int"/>
      </xs:sequence>
      <xs:assert test="total ge 0"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""

JSON_ORDER = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}},
}

#: (format value, document bytes, content type): each valid
VALID = [
    ("JsonSchema/draft-07", json.dumps(JSON_ORDER).encode(), "application/json"),
    ("jsonschema/draft-04", json.dumps(JSON_ORDER).encode(), "application/json"),
    ("JsonSchema/draft-06", json.dumps(JSON_ORDER).encode(), "application/json"),
    ("JsonSchema/draft/2019-09", json.dumps(JSON_ORDER).encode(), "application/json"),
    ("JSON-Schema", json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema"}).encode(), None),
    ("Avro/1.9", json.dumps(AVRO_ORDER).encode(), "application/json"),
    ("avro", b'"string"', "application/json"),
    ("Protobuf/3", PROTO3_ORDER.encode(), "text/plain"),
    ("protobuf/2", PROTO2_ORDER.encode(), "text/plain"),
    ("XSD/1.0", XSD_ORDER.encode(), "application/xml"),
    ("xsd11", XSD11_ORDER.encode(), "application/xml"),
    ("XSD/1.1", XSD11_ORDER.encode(), "application/xml"),
]

XS = b'<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">'

#: (format value, document bytes, content type, pointer suffix below .../schema, words of the reason)
INVALID = [
    (
        "JsonSchema/draft-07",
        json.dumps({"type": "object", "properties": {"a": {"type": "strin"}}}).encode(),
        "application/json",
        "/properties/a/type",
        "strin",
    ),
    (
        "JsonSchema/draft-07",
        json.dumps({"properties": {"a": {"minimum": "zero"}}}).encode(),
        "application/json",
        "/properties/a/minimum",
        "not of type 'number'",
    ),
    ("JsonSchema/draft-99", b"{}", "application/json", "", "unknown JSON Schema version"),
    ("Avro/1.9", json.dumps({"type": "record", "name": "R"}).encode(), "application/json", "", "fields"),
    ("Avro/1.9", b'{"type": "strin"}', "application/json", "", "strin"),
    (
        "avro",
        json.dumps(
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}
        ).encode(),
        "application/json",
        "",
        "Default value",
    ),
    ("Protobuf/3", b'syntax = "proto3";\nmessage A { strin x = 1; }\n', "text/plain", "", "strin"),
    ("Protobuf/3", b'syntax = "proto3";\nmessage A { int32 x = 1; int32 y = 1; }\n', "text/plain", "", "1"),
    ("Protobuf/3", b'syntax = "proto3";\nimport "other.proto";\n', "text/plain", "", "other.proto"),
    (
        "XSD/1.0",
        XS + b'<xs:element name="a" type="xs:nope"/></xs:schema>',
        "application/xml",
        "",
        "xs:nope",
    ),
    ("XSD/1.0", XSD11_ORDER.encode(), "application/xml", "", "assert"),
    (
        "xsd",
        XS + b'<xs:include schemaLocation="file:///etc/passwd"/></xs:schema>',
        "application/xml",
        "",
        "block",
    ),
]
