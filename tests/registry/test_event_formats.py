"""Events checked against data schemas in every format under ``--event-validation warn`` and
``enforce``: Avro (binary and JSON encoding), Protobuf (binary and the JSON mapping) and XML
against XSD, over HTTP in binary and structured mode and from an MQTT source (a real
mosquitto), on SQLite and on PostgreSQL (issue: schema registry that keeps producers honest)."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any

import fastavro
import httpx
import pytest
from paho.mqtt import publish
from pipeline.backends import backend, database, start_broker
from servers.mosquitto import MosquittoServer
from support.broker import Broker
from support.waiting import wait_until

from registry.schemas import AVRO_ORDER, PROTO3_ORDER, XSD_ORDER

__all__ = ["backend", "database", "start_broker"]

AVRO_VALID = {"id": "o-1", "total": 3, "note": None}
#: the Protobuf binary encoding of shop.Order{id: "o-1", total: 3}, written by hand
PROTO_VALID = b"\x0a\x03o-1\x10\x03"
#: a length that runs past the end of the message
PROTO_TRUNCATED = b"\x0a\x09o-1"
XML_VALID = "<order><id>o-1</id><total>3</total></order>"
XML_INVALID = "<order><id>o-1</id><total>three</total></order>"
TYPES = {"avro": "com.example.avro", "proto": "com.example.proto", "xml": "com.example.xml"}


def _avro_binary(datum: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_ORDER), datum)
    return out.getvalue()


def _define(broker: Broker) -> None:
    """The three schemas and one message definition per format."""
    http = broker.http
    for sid, fmt, doc, ctype in (
        ("avro", "Avro/1.9", json.dumps(AVRO_ORDER), "application/json"),
        ("proto", "Protobuf/3", PROTO3_ORDER, "text/plain"),
        ("xml", "XSD/1.0", XSD_ORDER, "application/xml"),
    ):
        r = http.put(
            f"/schemagroups/g/schemas/{sid}",
            content=doc.encode(),
            headers={"content-type": ctype, "xRegistry-format": fmt},
        )
        assert r.status_code == 201, r.text
    for key, fmt, uri in (
        ("avro", "Avro/1.9", "/schemagroups/g/schemas/avro"),
        ("proto", "Protobuf/3", "/schemagroups/g/schemas/proto#shop.Order"),
        ("xml", "XSD/1.0", "/schemagroups/g/schemas/xml"),
    ):
        message = {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": TYPES[key]}},
            "dataschemaformat": fmt,
            "dataschemauri": uri,
        }
        r = http.put(f"/messagegroups/m/messages/{TYPES[key]}", json=message)
        assert r.status_code == 201, r.text


def _binary(broker: Broker, n: int, kind: str, contenttype: str, body: bytes) -> httpx.Response:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": f"b-{n}",
        "ce-source": "/shop",
        "ce-type": TYPES[kind],
        "content-type": contenttype,
    }
    return broker.http.post("/events", content=body, headers=headers)


def _structured(n: int, kind: str, contenttype: str, **payload: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"s-{n}",
        "source": "/shop",
        "type": TYPES[kind],
        "datacontenttype": contenttype,
        **payload,
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


Sender = Callable[[int], httpx.Response]


def _cases(broker: Broker) -> list[tuple[str, Sender, bool, str]]:
    """(name, how it is sent, whether it conforms, the pointer of the violation)."""

    def binary(kind: str, ctype: str, body: bytes) -> Sender:
        return lambda n: _binary(broker, n, kind, ctype, body)

    def structured(kind: str, ctype: str, **payload: Any) -> Sender:
        return lambda n: broker.send(_structured(n, kind, ctype, **payload))

    avro = _avro_binary(AVRO_VALID)
    avro_json = {"id": "o-1", "total": 3, "note": {"string": "n"}}
    avro_wrong = {"id": "o-1", "total": "three", "note": None}
    proto_json = {"id": "o-1", "total": 3, "items": ["a"]}
    return [
        ("avro binary, binary mode", binary("avro", "application/avro", avro), True, ""),
        (
            "avro binary, binary mode, garbage",
            binary("avro", "application/avro", b"\x06"),
            False,
            "/data_base64",
        ),
        ("avro binary, structured", structured("avro", "application/avro", data_base64=_b64(avro)), True, ""),
        (
            "avro binary, structured, trailing bytes",
            structured("avro", "application/avro", data_base64=_b64(avro + b"zz")),
            False,
            "/data_base64",
        ),
        ("avro json, structured", structured("avro", "application/json", data=avro_json), True, ""),
        (
            "avro json, structured, wrong type",
            structured("avro", "application/json", data=avro_wrong),
            False,
            "/data",
        ),
        (
            "avro json, binary mode, field missing",
            binary("avro", "application/json", b'{"id": "o-1"}'),
            False,
            "/data",
        ),
        ("proto binary, binary mode", binary("proto", "application/protobuf", PROTO_VALID), True, ""),
        (
            "proto binary, binary mode, truncated",
            binary("proto", "application/protobuf", PROTO_TRUNCATED),
            False,
            "/data_base64",
        ),
        (
            "proto binary, structured",
            structured("proto", "application/protobuf", data_base64=_b64(PROTO_VALID)),
            True,
            "",
        ),
        ("proto json, structured", structured("proto", "application/json", data=proto_json), True, ""),
        (
            "proto json, structured, unknown field",
            structured("proto", "application/json", data={"id": "o-1", "colour": "red"}),
            False,
            "/data",
        ),
        (
            "proto json, binary mode, wrong type",
            binary("proto", "application/json", b'{"total": "three"}'),
            False,
            "/data",
        ),
        ("xml, binary mode", binary("xml", "application/xml", XML_VALID.encode()), True, ""),
        ("xml, binary mode, invalid", binary("xml", "application/xml", XML_INVALID.encode()), False, "/data"),
        ("xml, structured", structured("xml", "application/xml", data=XML_VALID), True, ""),
        ("xml, structured, not xml", structured("xml", "application/xml", data="<order>"), False, "/data"),
    ]


def _warnings(broker: Broker) -> float:
    for line in broker.http.get("/metrics").text.splitlines():
        if line.startswith("cebroker_event_validation_warnings_total "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.parametrize("mode", ["enforce", "warn"])
def test_event_data_in_every_format(
    start_broker: Callable[..., Broker], mosquitto: MosquittoServer, mode: str
) -> None:
    topic = f"formats/{mode}"
    broker = start_broker(event_validation=mode, sources=(f"{mosquitto.url}/{topic}?version=3&name=mq",))
    _define(broker)
    invalid = 0
    for n, (name, send, valid, pointer) in enumerate(_cases(broker)):
        r = send(n)
        if valid or mode == "warn":
            assert r.status_code == 202, (name, r.text)
        else:
            assert r.status_code == 400, (name, r.text)
            assert [e["pointer"] for e in r.json()["errors"]] == [pointer], name
        invalid += 0 if valid else 1
    if mode == "warn":
        assert _warnings(broker) == invalid
    # The same checks on events from a protocol source: the refused ones are kept as rejects.
    good = _structured(100, "avro", "application/avro", data_base64=_b64(_avro_binary(AVRO_VALID)))
    bad = _structured(101, "proto", "application/protobuf", data_base64=_b64(PROTO_TRUNCATED))
    wait_until(lambda: broker.http.get("/sources").json()[0]["consuming"])
    for event in (good, bad):
        publish.single(topic, json.dumps(event), qos=1, port=mosquitto.port)
    if mode == "enforce":
        rejects = wait_until(lambda: broker.http.get("/sources/mq/rejects").json()["items"])
        assert len(rejects) == 1
        assert "s-101" in json.dumps(rejects[0])
        assert "/data_base64" in rejects[0]["reason"]
        wait_until(lambda: broker.http.get("/sources").json()[0]["accepted"] == 1)
    else:
        wait_until(lambda: _warnings(broker) == invalid + 1)
        wait_until(lambda: broker.http.get("/sources").json()[0]["accepted"] == 2)


@pytest.mark.postgres
def test_a_schema_changed_on_one_instance_is_used_by_the_other(
    make_broker: Callable[..., Broker], postgres_url: str
) -> None:
    """Two instances on one PostgreSQL: a new version of an Avro schema written through one is
    compiled and used by the other for its next events."""
    first = make_broker(db=postgres_url, event_validation="enforce")
    second = make_broker(db=postgres_url, event_validation="enforce")
    _define(first)
    datum = _avro_binary(AVRO_VALID)
    wait_until(lambda: _binary(second, 1, "avro", "application/avro", b"\x06").status_code == 400)
    assert _binary(second, 2, "avro", "application/avro", datum).status_code == 202
    # a field without a default: data written with the first version no longer reads
    changed = {**AVRO_ORDER, "fields": [*AVRO_ORDER["fields"], {"name": "extra", "type": "int"}]}
    r = first.http.post(
        "/schemagroups/g/schemas/avro",
        content=json.dumps(changed).encode(),
        headers={"content-type": "application/json", "xRegistry-format": "Avro/1.9"},
    )
    assert r.status_code == 201, r.text
    n = iter(range(3, 10_000))
    wait_until(lambda: _binary(second, next(n), "avro", "application/avro", datum).status_code == 400)
    assert _binary(second, 10_001, "avro", "application/avro", datum + b"\x02").status_code == 202
