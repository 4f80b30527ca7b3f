"""Compatibility policies on schemas and schema groups (xRegistry ``compatibility``; Schema
Registry API: a conflict for versions that break the policy): per format, for each policy,
pairs of versions that pass and pairs that break with the expected errors (one per breaking
change, with the pointer in the old and in the new document); the transitive forms against
every earlier version; the dry run (``?check``); the same through the Schema Registry API's
paths (raw documents POSTed to the schema)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.testclient import TestClient

from registry.schemas import AVRO_ORDER, JSON_ORDER, PROTO2_ORDER, PROTO3_ORDER, XSD_ORDER

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
SCHEMA = "/schemagroups/g/schemas/s"


@dataclass
class Case:
    """Versions posted in order under ``policy``; ``errors`` are the expected errors of the
    last one as (direction, earlier version, pointer below its schema, old pointer), empty when
    it is accepted."""

    name: str
    fmt: str
    policy: str
    versions: list[Any]
    errors: list[tuple[str, str, str, str]] = field(default_factory=list)


def _json(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(JSON_ORDER)
    for path, value in changes.items():
        where: Any = doc
        keys = path.split("__")
        for key in keys[:-1]:
            where = where[key]
        if value is None:
            del where[keys[-1]]
        else:
            where[keys[-1]] = value
    return doc


def _avro(*fields: dict[str, Any]) -> dict[str, Any]:
    return {**AVRO_ORDER, "fields": list(fields)}


ID = {"name": "id", "type": "string"}
TOTAL = {"name": "total", "type": "int"}
TOTAL_LONG = {"name": "total", "type": "long"}
NOTE_DEFAULT = {"name": "note", "type": "string", "default": ""}
NOTE = {"name": "note", "type": "string"}
PROTO_V1 = PROTO3_ORDER
PROTO_ADDED = PROTO3_ORDER.replace(
    "  google.protobuf.Timestamp at = 4;\n", "  google.protobuf.Timestamp at = 4;\n  string note = 5;\n"
)
PROTO_RETYPED = PROTO3_ORDER.replace("int32 total = 2;", "string total = 2;")
PROTO_WIDENED = PROTO3_ORDER.replace("int32 total = 2;", "int64 total = 2;")
PROTO_RENAMED = PROTO3_ORDER.replace("int32 total = 2;", "int32 amount = 2;")
PROTO_SINGULAR = PROTO3_ORDER.replace("repeated string items = 3;", "string items = 3;")
PROTO2_REQUIRED = PROTO2_ORDER.replace("optional int32 total = 2;", "required int32 total = 2;")
F2 = "/messages/shop.Order/fields/2"

CASES = [
    # JSON Schema
    Case(
        "json add optional property",
        "JsonSchema/draft-07",
        "full",
        [JSON_ORDER, _json(properties__note={"type": "string"})],
    ),
    Case(
        "json add required property backward",
        "JsonSchema/draft-07",
        "backward",
        [JSON_ORDER, _json(required=["id", "total"])],
        [("backward", "1", "/required/1", "/required")],
    ),
    Case(
        "json add required property forward",
        "JsonSchema/draft-07",
        "forward",
        [JSON_ORDER, _json(required=["id", "total"])],
    ),
    Case(
        "json retype full",
        "JsonSchema/draft-07",
        "full",
        [JSON_ORDER, _json(properties__total={"type": "string"})],
        [
            ("backward", "1", "/properties/total/type", "/properties/total/type"),
            ("forward", "1", "/properties/total/type", "/properties/total/type"),
        ],
    ),
    Case(
        "json widen integer to number backward",
        "JsonSchema/draft-07",
        "backward",
        [JSON_ORDER, _json(properties__total={"type": "number", "minimum": 0})],
    ),
    Case(
        "json widen integer to number forward",
        "JsonSchema/draft-07",
        "forward",
        [JSON_ORDER, _json(properties__total={"type": "number", "minimum": 0})],
        [("forward", "1", "/properties/total/type", "/properties/total/type")],
    ),
    Case(
        "json raise minimum",
        "JsonSchema/draft-07",
        "backward",
        [JSON_ORDER, _json(properties__total={"type": "integer", "minimum": 10})],
        [("backward", "1", "/properties/total/minimum", "/properties/total/minimum")],
    ),
    Case(
        "json close the object",
        "JsonSchema/draft-07",
        "backward",
        [JSON_ORDER, _json(additionalProperties=False)],
        [("backward", "1", "/additionalProperties", "")],
    ),
    Case(
        "json narrow an enum",
        "JsonSchema/draft-07",
        "backward",
        [_json(properties__id={"enum": ["a", "b"]}), _json(properties__id={"enum": ["a"]})],
        [("backward", "1", "/properties/id/enum", "/properties/id/enum")],
    ),
    Case(
        "json none allows anything",
        "JsonSchema/draft-07",
        "none",
        [JSON_ORDER, _json(properties__total={"type": "string"})],
    ),
    # backward holds with the previous version; transitive finds the first one broken
    Case(
        "json transitive",
        "JsonSchema/draft-07",
        "backward",
        [JSON_ORDER, _json(properties__total=None), _json(properties__total={"type": "string"})],
    ),
    Case(
        "json transitive",
        "JsonSchema/draft-07",
        "backward_transitive",
        [JSON_ORDER, _json(properties__total=None), _json(properties__total={"type": "string"})],
        [("backward", "1", "/properties/total/type", "/properties/total/type")],
    ),
    # Avro
    Case(
        "avro add field with default", "Avro/1.9", "full", [_avro(ID, TOTAL), _avro(ID, TOTAL, NOTE_DEFAULT)]
    ),
    Case(
        "avro add field without default backward",
        "Avro/1.9",
        "backward",
        [_avro(ID, TOTAL), _avro(ID, TOTAL, NOTE)],
        [("backward", "1", "/fields/2", "/fields")],
    ),
    Case(
        "avro add field without default forward",
        "Avro/1.9",
        "forward",
        [_avro(ID, TOTAL), _avro(ID, TOTAL, NOTE)],
    ),
    Case(
        "avro remove field without default forward",
        "Avro/1.9",
        "forward",
        [_avro(ID, TOTAL), _avro(ID)],
        [("forward", "1", "/fields", "/fields/1")],
    ),
    Case(
        "avro promote int to long backward", "Avro/1.9", "backward", [_avro(ID, TOTAL), _avro(ID, TOTAL_LONG)]
    ),
    Case(
        "avro promote int to long full",
        "Avro/1.9",
        "full",
        [_avro(ID, TOTAL), _avro(ID, TOTAL_LONG)],
        [("forward", "1", "/fields/1/type", "/fields/1/type")],
    ),
    Case("avro transitive", "Avro/1.9", "backward", [_avro(ID), _avro(ID, NOTE_DEFAULT), _avro(ID, NOTE)]),
    Case(
        "avro transitive",
        "Avro/1.9",
        "backward_transitive",
        [_avro(ID), _avro(ID, NOTE_DEFAULT), _avro(ID, NOTE)],
        [("backward", "1", "/fields/1", "/fields")],
    ),
    Case(
        "avro forward transitive",
        "Avro/1.9",
        "forward_transitive",
        [_avro(ID, TOTAL), _avro(ID, {**TOTAL, "default": 0}), _avro(ID)],
        [("forward", "1", "/fields", "/fields/1")],
    ),
    # Protobuf
    Case("proto add field", "Protobuf/3", "full_transitive", [PROTO_V1, PROTO_ADDED]),
    Case("proto widen int32 to int64", "Protobuf/3", "full", [PROTO_V1, PROTO_WIDENED]),
    Case(
        "proto retype",
        "Protobuf/3",
        "full",
        [PROTO_V1, PROTO_RETYPED],
        [("backward", "1", f"{F2}/type", f"{F2}/type"), ("forward", "1", f"{F2}/type", f"{F2}/type")],
    ),
    Case(
        "proto rename",
        "Protobuf/3",
        "backward",
        [PROTO_V1, PROTO_RENAMED],
        [("backward", "1", f"{F2}/name", f"{F2}/name")],
    ),
    Case(
        "proto repeated to singular",
        "Protobuf/3",
        "forward",
        [PROTO_V1, PROTO_SINGULAR],
        [("forward", "1", "/messages/shop.Order/fields/3/label", "/messages/shop.Order/fields/3/label")],
    ),
    Case(
        "proto2 optional to required backward",
        "Protobuf/2",
        "backward",
        [PROTO2_ORDER, PROTO2_REQUIRED],
        [("backward", "1", f"{F2}/label", f"{F2}/label")],
    ),
    Case("proto2 optional to required forward", "Protobuf/2", "forward", [PROTO2_ORDER, PROTO2_REQUIRED]),
    Case(
        "proto transitive",
        "Protobuf/3",
        "forward",
        [PROTO_V1, PROTO_V1.replace("  int32 total = 2;\n", ""), PROTO_RETYPED],
    ),
    Case(
        "proto transitive",
        "Protobuf/3",
        "forward_transitive",
        [PROTO_V1, PROTO_V1.replace("  int32 total = 2;\n", ""), PROTO_RETYPED],
        [("forward", "1", f"{F2}/type", f"{F2}/type")],
    ),
]


def _body(fmt: str, doc: Any) -> tuple[bytes, str]:
    if isinstance(doc, str):
        return doc.encode(), "text/plain"
    return json.dumps(doc).encode(), "application/json"


def _post(client: TestClient, fmt: str, doc: Any, query: str = "") -> Any:
    """A new version the Schema Registry API's way: the raw document POSTed to the schema."""
    content, ctype = _body(fmt, doc)
    headers = {"content-type": ctype, "xRegistry-format": fmt}
    return client.post(SCHEMA + query, content=content, headers=headers)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.name}-{c.policy}" for c in CASES])
@pytest.mark.parametrize("where", ["schema", "group"])
def test_policy_table(client: TestClient, case: Case, where: str) -> None:
    if where == "group":
        assert client.put("/schemagroups/g", json={"compatibility": case.policy}).status_code == 201
    for doc in case.versions[:-1]:
        assert _post(client, case.fmt, doc).status_code == 201
        if where == "schema":
            r = client.patch(SCHEMA + "/meta", json={"compatibility": case.policy})
            assert r.status_code == 200, r.text
    before = client.get(SCHEMA + "$details?inline=versions").json()
    last = str(len(case.versions))
    dry = _post(client, case.fmt, case.versions[-1], "?check")
    if not case.errors:
        assert dry.status_code == 201, dry.text
        assert client.get(SCHEMA + "$details?inline=versions").json() == before  # the dry run kept nothing
        r = _post(client, case.fmt, case.versions[-1])
        assert r.status_code == 201, r.text
        details = client.get(f"{SCHEMA}/versions/{last}$details").json()
        if case.policy == "none":
            assert "compatibilityvalidated" not in details
        else:
            assert details["compatibilityvalidated"] is True
        return
    expected = sorted(
        (
            direction,
            earlier,
            f"{SCHEMA}/versions/{last}/schema{new}",
            f"{SCHEMA}/versions/{earlier}/schema{old}",
        )
        for direction, earlier, new, old in case.errors
    )
    for r in (dry, _post(client, case.fmt, case.versions[-1])):
        body = r.json()
        assert r.status_code == 409, body
        assert body["type"] == CORE + "compatibility_violation"
        assert body["subject"] == f"{SCHEMA}/versions/{last}"
        got = sorted((e["direction"], e["version"], e["pointer"], e["oldpointer"]) for e in body["errors"])
        assert got == expected, body["errors"]
    assert client.get(SCHEMA + "$details?inline=versions").json() == before


def test_replacing_a_version_is_checked_against_the_earlier_ones(client: TestClient) -> None:
    assert _post(client, "Avro/1.9", _avro(ID, TOTAL)).status_code == 201
    assert client.patch(SCHEMA + "/meta", json={"compatibility": "backward"}).status_code == 200
    assert _post(client, "Avro/1.9", _avro(ID, TOTAL, NOTE_DEFAULT)).status_code == 201
    content, ctype = _body("Avro/1.9", _avro(ID, TOTAL, NOTE))
    r = client.put(SCHEMA + "/versions/2", content=content, headers={"content-type": ctype})
    assert r.status_code == 409
    assert [e["oldpointer"] for e in r.json()["errors"]] == [f"{SCHEMA}/versions/1/schema/fields"]


def test_policy_values_are_checked(client: TestClient) -> None:
    assert _post(client, "Avro/1.9", _avro(ID)).status_code == 201
    r = client.patch(SCHEMA + "/meta", json={"compatibility": "sideways"})
    assert r.status_code == 400
    assert r.json()["type"] == CORE + "invalid_attribute"
    r = client.put("/schemagroups/g", json={"compatibility": "sideways"})
    assert r.status_code == 400
    assert r.json()["errors"][0]["pointer"] == "/schemagroups/g/compatibility"


def test_xsd_versions_are_accepted_and_say_compatibility_is_not_checked(client: TestClient) -> None:
    assert client.put("/schemagroups/g", json={"compatibility": "full"}).status_code == 201
    assert _post(client, "XSD/1.0", XSD_ORDER).status_code == 201
    assert _post(client, "XSD/1.0", XSD_ORDER.replace('"total"', '"sum"')).status_code == 201
    details = client.get(SCHEMA + "/versions/2$details").json()
    assert details["compatibilityvalidated"] is False
    assert "no compatibility rules" in details["compatibilityvalidatedreason"]


def test_dry_runs_of_other_writes_keep_nothing(client: TestClient) -> None:
    assert _post(client, "Avro/1.9", _avro(ID)).status_code == 201
    before = client.get("/export").json()
    r = client.delete(SCHEMA + "?check")
    assert r.status_code == 204
    assert r.content == b""
    r = client.put("/messagegroups/m?check", json={"description": "new"})
    assert r.status_code == 201
    assert r.json()["description"] == "new"
    r = client.put(
        SCHEMA + "/versions/1?check",
        content=b'{"type": "strin"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
    assert client.get("/export").json() == before
