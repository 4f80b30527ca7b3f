"""Every schema version is checked in its format on every write (Schema Registry API 2.2.5:
"valid for its format"): JSON Schema against its dialect's meta-schema, Avro by its parsers,
Protobuf compiled by protoc, XSD 1.0/1.1 read by xmlschema. An invalid document is
``format_violation`` (400) naming the pointer and the parser's reason, and nothing is stored;
a format the registry does not know is stored and says so (``formatvalidated``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from support.broker import Broker
from support.servers import ServerThread

from cebroker.cli import main
from cebroker.registry.formats import parse_format, proto_schema
from cebroker.registry.formats.catalog import Formats
from registry.schemas import INVALID, PROTO3_ORDER, VALID

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
VERSION = "/schemagroups/g/schemas/s/versions/1"


@pytest.mark.parametrize(("fmt", "doc", "ctype"), VALID, ids=[f"{v[0]}-{n}" for n, v in enumerate(VALID)])
def test_valid_documents_are_stored_as_validated(
    client: TestClient, fmt: str, doc: bytes, ctype: str | None
) -> None:
    headers = {"xRegistry-format": fmt, **({"content-type": ctype} if ctype else {})}
    r = client.put("/schemagroups/g/schemas/s", content=doc, headers=headers)
    assert r.status_code == 201, r.text
    details = client.get("/schemagroups/g/schemas/s$details").json()
    assert details["formatvalidated"] is True
    assert "formatvalidatedreason" not in details
    assert client.get("/schemagroups/g/schemas/s").content == doc


def _refused(r: httpx2.Response, pointer: str, words: str) -> None:
    body = r.json()
    assert r.status_code == 400, body
    assert body["type"] == CORE + "format_violation"
    assert body["subject"] == VERSION
    assert any(
        e["pointer"] == VERSION + "/schema" + pointer and words in e["detail"] for e in body["errors"]
    ), body


@pytest.mark.parametrize(
    ("fmt", "doc", "ctype", "pointer", "words"), INVALID, ids=[f"{v[0]}-{n}" for n, v in enumerate(INVALID)]
)
def test_invalid_documents_are_refused_by_every_write(
    client: TestClient, fmt: str, doc: bytes, ctype: str, pointer: str, words: str
) -> None:
    """The same document refused by a raw PUT, a raw POST (new version), a $details PUT and an
    import (POST /, what ``registry sync`` sends); nothing is stored by any of them."""
    headers = {"xRegistry-format": fmt, "content-type": ctype}
    _refused(client.put("/schemagroups/g/schemas/s", content=doc, headers=headers), pointer, words)
    _refused(client.post("/schemagroups/g/schemas/s", content=doc, headers=headers), pointer, words)
    inline: dict[str, object] = {"format": fmt, "contenttype": ctype}
    if ctype == "application/json":
        inline["schema"] = json.loads(doc)
    else:
        inline["schema"] = doc.decode()
    _refused(client.put("/schemagroups/g/schemas/s$details", json=inline), pointer, words)
    imported = {"schemagroups": {"g": {"schemas": {"s": {"versions": {"1": inline}}}}}}
    _refused(client.post("/", json=imported), pointer, words)
    assert client.get("/schemagroups").json() == {}


def test_an_invalid_new_version_leaves_the_earlier_ones(client: TestClient) -> None:
    headers = {"xRegistry-format": "Protobuf/3", "content-type": "text/plain"}
    assert (
        client.put("/schemagroups/g/schemas/s", content=PROTO3_ORDER.encode(), headers=headers).status_code
        == 201
    )
    before = client.get("/schemagroups/g/schemas/s$details?inline=versions").json()
    r = client.post("/schemagroups/g/schemas/s", content=b"message {", headers=headers)
    assert r.status_code == 400
    assert r.json()["subject"] == "/schemagroups/g/schemas/s/versions/2"
    assert client.get("/schemagroups/g/schemas/s$details?inline=versions").json() == before


def test_unknown_format_is_stored_and_says_so(client: TestClient) -> None:
    headers = {"xRegistry-format": "JsonStructure/1.0", "content-type": "application/json"}
    assert client.put("/schemagroups/g/schemas/s", content=b"{}", headers=headers).status_code == 201
    details = client.get("/schemagroups/g/schemas/s$details").json()
    assert details["formatvalidated"] is False
    assert "does not know" in details["formatvalidatedreason"]
    # the outcome is the server's: a client cannot set it
    r = client.put("/schemagroups/g/schemas/s$details", json={**details, "formatvalidated": True})
    assert r.json()["formatvalidated"] is False


def test_format_names_match_case_and_version_suffixes() -> None:
    cases = {
        "Avro/1.9": ("avro", "1.9"),
        "AVRO": ("avro", ""),
        "JsonSchema/draft-07": ("jsonschema", "draft-07"),
        "json-schema": ("jsonschema", ""),
        "JSONSchema/draft/2020-12": ("jsonschema", "draft/2020-12"),
        "Protobuf/3": ("protobuf", "3"),
        "proto2": ("protobuf", "2"),
        "XSD/1.1": ("xsd", "1.1"),
        "xsd11": ("xsd", "11"),
        "XMLSchema/1.0": ("xsd", "1.0"),
    }
    for value, (family, version) in cases.items():
        name = parse_format(value)
        assert name is not None, value
        assert (name.family, name.version) == (family, version)
    assert parse_format("JsonStructure/1.0") is None
    assert parse_format(7) is None


def test_protobuf_compilation_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler runs in a child process with a deadline: past it the document is refused
    with that reason (the broker is never held by the compiler)."""
    monkeypatch.setattr(proto_schema, "COMPILE_TIMEOUT", 0.001)
    problems = Formats().protobuf.problems(PROTO3_ORDER.encode(), "3")
    assert [p.reason for p in problems] == ["the compiler took longer than 0.001 s"]


def test_hostile_protobuf_source_is_refused_not_fatal() -> None:
    """Deep nesting and a huge field number are compiler errors, not crashes."""
    deep = 'syntax = "proto3";\n' + "message M { " * 200 + "}" * 200 + "\n"
    formats = Formats()
    found = formats.protobuf.problems(deep.encode(), "3")
    assert all(p.reason for p in found)
    big = b'syntax = "proto3";\nmessage A { int32 x = 536870912; }\n'
    assert formats.protobuf.problems(big, "3")
    assert formats.protobuf.problems(b"\xff\xfe", "3")[0].reason.startswith("not UTF-8")


def test_registry_sync_refuses_an_invalid_document_of_another_registry(
    make_broker: Callable[..., Broker], capsys: pytest.CaptureFixture[str]
) -> None:
    """A source registry (here a plain server of an export) holding an invalid Avro schema:
    ``registry sync`` reports the refusal, with the pointer, and the target stores nothing of
    that group."""
    export = {
        "specversion": "1.0-rc2",
        "schemagroups": {
            "g": {
                "schemagroupid": "g",
                "schemas": {
                    "s": {
                        "schemaid": "s",
                        "versions": {
                            "1": {"versionid": "1", "format": "Avro/1.9", "schema": {"type": "strin"}}
                        },
                    }
                },
            }
        },
    }

    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(export)

    target = make_broker()
    with ServerThread(Starlette(routes=[Route("/export", serve)])) as source:
        assert main(["registry", "sync", "--from", source.url, "--to", target.url]) == 1
    err = capsys.readouterr().err
    assert "registry sync failed" in err
    assert "/schemagroups/g/schemas/s/versions/1/schema" in err
    assert target.http.get("/schemagroups").json() == {}
