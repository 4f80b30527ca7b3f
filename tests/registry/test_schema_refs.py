"""Schema references never leave the registry (issue: hostile input, item 1).

A ``$ref`` resolves inside its document or to this registry's schemas; any other target (a
``file:`` URL, another host, a ``$id`` that moves the base elsewhere) is refused when the schema
is stored, with a pointer to the reference, and is never opened or fetched, neither then nor
when events are checked. Watched with inotify on a secret file and a listener counting
connections."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.broker import Broker

from cebroker.registry.schemarefs import registry_retriever
from cebroker.registry.validation import Definition
from registry.watch import ConnectionCounter, FileWatch

BASE = "http://broker.test"
SCHEMA_PATH = "/schemagroups/g/schemas/order"
SECRET = "s3cr3t-token-42"


@pytest.fixture
def secret(tmp_path: Path) -> Iterator[tuple[Path, FileWatch]]:
    path = tmp_path / "secret.json"
    path.write_text('{"enum": ["' + SECRET + '"]}', encoding="utf-8")
    with FileWatch(path) as watch:
        yield path, watch


@pytest.fixture
def listener() -> Iterator[ConnectionCounter]:
    with ConnectionCounter() as counter:
        yield counter


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    broker = make_broker(base_url=BASE, event_validation="enforce")
    group = {"envelope": "CloudEvents/1.0"}
    assert broker.http.put("/messagegroups/orders", json=group).status_code == 201
    message = {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.order"}},
        "dataschemaformat": "JsonSchema/draft-07",
        "dataschemauri": SCHEMA_PATH,
    }
    assert (
        broker.http.put("/messagegroups/orders/messages/com.example.order", json=message).status_code == 201
    )
    return broker


def _put_schema(broker: Broker, schema: Any, path: str = SCHEMA_PATH) -> Any:
    return broker.http.put(path, json=schema, headers={"content-type": "application/json"})


def _event(n: int, data: Any) -> dict[str, Any]:
    return {"specversion": "1.0", "id": f"e{n}", "source": "/o", "type": "com.example.order", "data": data}


def _assert_untouched(path: Path, watch: FileWatch, listener: ConnectionCounter) -> None:
    """Nothing opened the secret and nothing connected to the listener. Opens are reported by
    the kernel as they happen; connections are accepted in order, so once a control connection
    of our own has been counted, any earlier one would have been counted too."""
    assert watch.poll() == 0
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5):
        pass
    deadline = time.monotonic() + 10
    while listener.connections < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.connections == 1  # ours, and only ours
    path.read_bytes()
    assert watch.poll() > 0  # the watch does see a read


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"$ref": "file://{secret}"}, "/$ref"),
        ({"properties": {"a": {"$ref": "{listener}/schema.json"}}}, "/properties/a/$ref"),
        ({"$id": "file://{dir}/", "items": {"$ref": "secret.json"}}, "/items/$ref"),
        ({"$defs": {"x": {"$ref": "https://elsewhere.example/s.json#/x"}}}, "/$defs/x/$ref"),
        ({"anyOf": [{"type": "string"}, {"$ref": "{listener}/a#/b"}]}, "/anyOf/1/$ref"),
        ({"$schema": "{listener}/meta"}, "/$schema"),
    ],
    ids=["file", "http", "id-moves-base-to-file", "foreign-host", "nested-http", "unknown-dialect"],
)
def test_foreign_reference_is_refused_at_store_time(
    broker: Broker,
    secret: tuple[Path, FileWatch],
    listener: ConnectionCounter,
    schema: dict[str, Any],
    pointer: str,
) -> None:
    path, watch = secret
    text = str(schema).replace("'", '"')
    filled = (
        text.replace("{secret}", str(path))
        .replace("{dir}", str(path.parent))
        .replace("{listener}", listener.url)
    )
    r = _put_schema(broker, json.loads(filled))
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    where = f"{SCHEMA_PATH}/versions/1/schema{pointer}"
    assert [e["pointer"] for e in r.json()["errors"]] == [where]
    assert SECRET not in r.text
    assert broker.http.get(SCHEMA_PATH).status_code == 404  # refused means not stored
    _assert_untouched(path, watch, listener)


def test_references_inside_the_registry_are_followed(broker: Broker) -> None:
    """Inside the document, by registry URL and by path: stored, then used to check events; a
    refusal quotes only the event and the schemas' own text."""
    amount = {"type": "integer", "minimum": 1}
    assert (
        _put_schema(broker, {"$defs": {"amount": amount}}, "/schemagroups/g/schemas/common").status_code
        == 201
    )
    schema = {
        "type": "object",
        "properties": {
            "amount": {"$ref": "/schemagroups/g/schemas/common#/$defs/amount"},
            "copy": {"$ref": f"{BASE}/schemagroups/g/schemas/common/versions/1#/$defs/amount"},
            "kind": {"$ref": "#/$defs/kind"},
        },
        "$defs": {"kind": {"enum": ["retail", "wholesale"]}},
    }
    assert _put_schema(broker, schema).status_code == 201
    assert broker.send(_event(1, {"amount": 3, "copy": 2, "kind": "retail"})).status_code == 202
    r = broker.send(_event(2, {"amount": 0, "copy": "x", "kind": "guess"}))
    assert r.status_code == 400
    errors = {e["pointer"]: e["detail"] for e in r.json()["errors"]}
    assert set(errors) == {"/data/amount", "/data/copy", "/data/kind"}
    assert "guess" in errors["/data/kind"]
    assert "retail" in errors["/data/kind"]


def test_reference_to_a_missing_schema_or_pointer_is_refused(broker: Broker) -> None:
    r = _put_schema(broker, {"$ref": "/schemagroups/g/schemas/nothing"})
    assert r.status_code == 400
    assert r.json()["errors"][0]["detail"] == "names no JSON schema stored in this registry"
    r = _put_schema(broker, {"$ref": "#/definitions/nothing"})
    assert r.status_code == 400
    assert r.json()["errors"][0]["pointer"] == f"{SCHEMA_PATH}/versions/1/schema/$ref"


def test_inline_dataschema_references_are_checked(
    broker: Broker, secret: tuple[Path, FileWatch], listener: ConnectionCounter
) -> None:
    message = {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.inline"}},
        "dataschemaformat": "JsonSchema/draft-07",
        "dataschema": {"properties": {"x": {"$ref": f"{listener.url}/x"}}},
    }
    r = broker.http.put("/messagegroups/orders/messages/inline", json=message)
    assert r.status_code == 400
    pointer = "/messagegroups/orders/messages/inline/versions/1/dataschema/properties/x/$ref"
    assert [e["pointer"] for e in r.json()["errors"]] == [pointer]
    _assert_untouched(secret[0], secret[1], listener)


def test_schema_in_a_non_json_format_is_not_read_as_json_schema(broker: Broker) -> None:
    """An Avro schema may hold a member called $ref: it is not a JSON Schema reference."""
    r = broker.http.put(
        "/schemagroups/avro/schemas/s$details",
        json={
            "format": "Avro/1.9",
            "schema": {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "int"}],
                "$ref": "file:///etc/passwd",
            },
        },
    )
    assert r.status_code == 201, r.text


def test_checking_events_never_reaches_out(
    secret: tuple[Path, FileWatch], listener: ConnectionCounter
) -> None:
    """A schema that names foreign documents (as one stored before these rules could) compiles
    to nothing when events are checked: the retriever refuses, nothing is opened or fetched."""
    path, watch = secret
    retriever = registry_retriever(BASE, lambda xid: None)
    for target in (f"file://{path}", f"{listener.url}/s.json"):
        definition = Definition("/messagegroups/g/messages/m", {}, {"$ref": target}, retriever=retriever)
        assert definition.data_validator() is None
    _assert_untouched(path, watch, listener)
