"""Write semantics beyond the representative cases (core spec "Creating or Updating Entities",
"Versions", HTTP binding POST/PATCH on collections), persistence, and change-event bookkeeping
(core events: one event per subject and request, precedence, correlation)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from cebroker.registry.changes import ChangeLog, build_events
from cebroker.registry.component import RegistryComponent
from cebroker.storage import StorageOptions, create_storage
from registry.support import BASE, SCENARIOS, RecordingIngestor, make_client, new_registry

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"


def test_collection_post_and_patch(client: TestClient) -> None:
    """POST on a collection upserts each entry (PUT semantics); PATCH merges each."""
    r = client.post("/messagegroups", json={"a": {"description": "A", "labels": {"k": "v"}}, "b": {}})
    assert r.status_code == 200
    assert set(r.json()) == {"a", "b"}
    r = client.patch("/messagegroups", json={"a": {"name": "named"}})
    assert r.json()["a"]["description"] == "A"  # kept by PATCH
    assert r.json()["a"]["name"] == "named"
    r = client.post("/messagegroups", json={"a": {"name": "again"}})
    assert "description" not in r.json()["a"]  # replaced by POST
    r = client.patch("/messagegroups/a", json={"labels": None})
    assert "labels" not in r.json()


def test_endpoints_hold_messages(client: TestClient, component: RegistryComponent) -> None:
    """Endpoints import the messages resource: definitions inline in an endpoint are served and
    used for validation like those of message groups (Endpoint extension, ximportresources)."""
    # an endpoint created implicitly would lack its required usage
    assert (
        client.put("/endpoints/e/messages/x", json={}).json()["errors"][0]["pointer"] == "/endpoints/e/usage"
    )
    client.put("/endpoints/e", json={"usage": ["producer"], "protocol": "HTTP"})
    r = client.put(
        "/endpoints/e/messages/com.example.e",
        json={"envelope": "CloudEvents/1.0", "envelopemetadata": {"subject": {"required": True}}},
    )
    assert r.status_code == 201, r.text
    assert client.get("/endpoints/e").json()["messagescount"] == 1
    event = {"specversion": "1.0", "id": "1", "type": "com.example.e", "source": "/s"}
    assert [v.pointer for v in component.validator.validate(event)] == ["/subject"]


def test_group_post_takes_resource_maps_only(client: TestClient) -> None:
    """POST on a group upserts its resource collections; anything else is resources_only."""
    r = client.post("/messagegroups/g", json={"messages": {"m1": {}, "m2": {"description": "two"}}})
    assert r.status_code == 200
    assert set(r.json()["messages"]) == {"m1", "m2"}
    r = client.post("/messagegroups/g", json={"description": "x"})
    assert r.json()["type"] == CORE + "resources_only"


def test_message_keeps_one_version(client: TestClient) -> None:
    """Messages have maxversions 1: a new version replaces the old one."""
    client.put("/messagegroups/g/messages/m", json={"description": "one"})
    r = client.post("/messagegroups/g/messages/m", json={"description": "two"})
    assert r.status_code == 201
    assert r.json()["versionid"] == "2"
    versions = client.get("/messagegroups/g/messages/m/versions").json()
    assert list(versions) == ["2"]
    assert client.get("/messagegroups/g/messages/m").json()["description"] == "two"


def test_documents_in_json_and_binary(client: TestClient) -> None:
    """$details bodies carry documents inline (JSON value, string or base64); binary comes back as base64."""
    avro = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    r = client.put("/schemagroups/s/schemas/avro$details", json={"format": "Avro/1.9", "schema": avro})
    assert r.status_code == 201
    assert client.get("/schemagroups/s/schemas/avro").json() == avro
    proto = 'syntax = "proto3";'
    client.put("/schemagroups/s/schemas/proto$details", json={"format": "Protobuf/3", "schema": proto})
    assert client.get("/schemagroups/s/schemas/proto").content == proto.encode()
    raw = bytes(range(256))
    r = client.put(
        "/schemagroups/s/schemas/bin$details",
        json={
            "format": "Custom/1",
            "schemabase64": base64.b64encode(raw).decode(),
            "contenttype": "application/x-bin",
        },
    )
    assert r.status_code == 201, r.text
    got = client.get("/schemagroups/s/schemas/bin")
    assert got.content == raw
    assert got.headers["content-type"] == "application/x-bin"
    inlined = client.get("/schemagroups/s/schemas/bin$details?inline=schema").json()
    assert base64.b64decode(inlined["schemabase64"]) == raw
    r = client.put("/schemagroups/s/schemas/bad$details", json={"format": "X/1", "schemabase64": "%%%"})
    assert r.json()["type"] == CORE + "invalid_attribute"


def test_raw_version_put_and_external_document(client: TestClient) -> None:
    """A version PUT without $details takes the document; a schemaurl version redirects (303)."""
    r = client.put(
        "/schemagroups/s/schemas/x/versions/v1",
        content=b"<xsd/>",
        headers={"content-type": "application/xml"},
    )
    assert r.status_code == 201
    assert r.content == b"<xsd/>"
    client.put(
        "/schemagroups/s/schemas/ext$details",
        json={"format": "X/1", "schemaurl": "https://example.com/s.json"},
    )
    r = client.get("/schemagroups/s/schemas/ext", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "https://example.com/s.json"


def test_setdefaultversionid_request_and_ignore_epoch(client: TestClient) -> None:
    """?setdefaultversionid=request pins the version the request wrote; ?ignore=epoch skips epoch checks."""
    headers = {"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"}
    client.put("/schemagroups/s/schemas/o", content=b"{}", headers=headers)
    array, number = b'{"type": "array"}', b'{"type": "number"}'
    client.post("/schemagroups/s/schemas/o?setdefaultversionid=request", content=array, headers=headers)
    client.post("/schemagroups/s/schemas/o", content=number, headers=headers)
    meta = client.get("/schemagroups/s/schemas/o/meta").json()
    assert (meta["defaultversionid"], meta["defaultversionsticky"]) == ("2", True)
    assert client.put("/schemagroups/s", json={"epoch": 77}).json()["type"] == CORE + "mismatched_epoch"
    assert client.put("/schemagroups/s?ignore=epoch", json={"epoch": 77}).status_code == 200


def test_filters(client: TestClient) -> None:
    """Filter expressions: presence, null, !=, numeric order, nested paths through versions."""
    client.post(
        "/messagegroups",
        json={
            "a": {"labels": {"tier": "gold"}},
            "b": {"description": "bee"},
            "c": {},
        },
    )
    client.put("/messagegroups/a/messages/m", json={"description": "x"})

    def ids(query: str) -> set[str]:
        return set(client.get(f"/messagegroups?{query}").json())

    assert ids("filter=description") == {"b"}
    assert ids("filter=description=null") == {"a", "c"}
    assert ids("filter=messagegroupid!=a") == {"b", "c"}
    assert ids("filter=labels.tier=GOLD") == {"a"}  # strings compare ignoring case
    assert ids("filter=epoch>=2") == {"a"}  # a got a message: its epoch moved
    assert ids("filter=messages.versions.versionid=1") == {"a"}
    assert ids("filter=messages.description=x,labels.tier=gold") == {"a"}
    assert ids("filter=messages.description=y") == set()
    root = client.get("/?inline=messagegroups&filter=messagegroups.messagegroupid=b").json()
    assert (list(root["messagegroups"]), root["messagegroupscount"]) == (["b"], 1)
    root = client.get("/?inline=messagegroups&filter=messagegroups.messagegroupid=zzz").json()
    assert (root["messagegroups"], root["messagegroupscount"]) == ({}, 0)


@XREGISTRY_SAMPLES.needed
def test_data_survives_restart(tmp_path: Path) -> None:
    """The registry is durable in the database file: a new component sees the same state."""
    db = tmp_path / "cebroker.db"
    doc = json.loads((SCENARIOS / "watchkam-jsons07.xreg.json").read_text())
    with make_client(*new_registry(db, ingestor=RecordingIngestor())) as c:
        assert c.post("/", json=doc).status_code == 200
        before = c.get("/export").json()
    ingestor = RecordingIngestor()
    with make_client(*new_registry(db, ingestor=ingestor)) as c:
        assert c.get("/export").json() == before
    assert ingestor.events == []  # nothing changed on start: no events


@XREGISTRY_SAMPLES.needed
def test_definitions_check_events_after_a_restart(tmp_path: Path) -> None:
    """The definition index is built when the registry starts, not only after a write: a broker
    restarted over a registry with definitions checks events against them at once."""
    db = tmp_path / "cebroker.db"
    definition = {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.x"}, "subject": {"required": True}},
    }
    event = {"specversion": "1.0", "id": "1", "type": "com.example.x", "source": "/s"}
    with make_client(*new_registry(db)) as c:
        assert c.put("/messagegroups/g/messages/m", json=definition).status_code == 201
    component, storage = new_registry(db)
    with make_client(component, storage):
        assert [v.pointer for v in component.validator.validate(event)] == ["/subject"]


def test_export_imports_into_another_registry(tmp_path: Path, client: TestClient) -> None:
    """GET /export?collections is directly POST-able to a fresh registry (HTTP binding ?collections)."""
    doc = json.loads((SCENARIOS / "lightbulb-avro.xreg.json").read_text())
    client.post("/", json=doc)
    client.patch(f"/schemagroups/{next(iter(doc['schemagroups']))}", json={"description": "patched"})
    collections = client.get("/export?collections").json()
    assert set(collections) == {"endpoints", "messagegroups", "schemagroups"}
    with make_client(*new_registry(tmp_path / "other.db")) as other:
        # epochs are the other registry's own: its entities' epochs are not checked
        assert other.post("/", json=collections).json()["type"] == CORE + "mismatched_epoch"
        assert other.post("/?ignore=epoch", json=collections).status_code == 200
        mine = client.get("/messagegroups?inline=*").json()
        theirs = other.get("/messagegroups?inline=*").json()
        assert {g: set(v["messages"]) for g, v in mine.items()} == {
            g: set(v["messages"]) for g, v in theirs.items()
        }
        schemas = other.get("/schemagroups?inline=*").json()
        assert next(iter(schemas.values()))["description"] == "patched"


def test_change_log_precedence() -> None:
    """At most one event per subject and request: deleted > created > updated; delete + create = update."""
    log = ChangeLog()
    log.record("/g/a", "group", "updated", ["x"])
    log.record("/g/a", "group", "updated", ["y"])
    log.record("/g/b", "group", "created")
    log.record("/g/b", "group", "updated", ["z"])
    log.record("/g/c", "group", "created")
    log.record("/g/c", "group", "deleted")
    log.record("/g/d", "group", "deleted")
    log.record("/g/d", "group", "created")
    got = {c.xid: (c.op, c.changed) for c in log}
    assert got == {
        "/g/a": ("updated", ["x", "y"]),
        "/g/b": ("created", []),
        "/g/c": ("deleted", []),
        "/g/d": ("updated", []),
    }


def test_schema_changes_have_the_schema_registry_types(
    client: TestClient, ingestor: RecordingIngestor
) -> None:
    """Schema writes also produce io.cloudevents.schemaregistry.updated.v1 / deleted.v1 with no data."""
    headers = {"content-type": "application/json"}
    client.put("/schemagroups/s/schemas/o", content=b"{}", headers=headers)
    client.delete("/schemagroups/s/schemas/o/versions/1")
    types = ingestor.types_for("/schemagroups/s/schemas/o/versions/1")
    assert types == [
        "io.xregistry.version.created",
        "io.cloudevents.schemaregistry.updated.v1",
        "io.xregistry.version.deleted",
        "io.cloudevents.schemaregistry.deleted.v1",
    ]
    # deleting the last version deletes the resource
    assert "io.xregistry.resource.deleted" in ingestor.types_for("/schemagroups/s/schemas/o")
    created = next(e for e in ingestor.events if e["subject"] == "/schemagroups/s/schemas/o/versions/1")
    first = client.put("/schemagroups/s2", json={})  # the client learns the request's correlation id
    assert {e.get("xregcorrelationid") for e in ingestor.events if e["subject"] == "/schemagroups/s2"} - {
        None
    } == {first.headers["xregistry-xregcorrelationid"]}
    assert created["time"] == client.get("/schemagroups/s").json()["createdat"]  # the request's time
    legacy = [e for e in ingestor.events if e["type"].startswith("io.cloudevents.schemaregistry")]
    assert all("data" not in e and e["source"] == BASE for e in legacy)


def test_events_of_one_request_share_a_correlation_id() -> None:
    """Each request's events carry one xregcorrelationid; updates list the changed attributes."""
    log = ChangeLog()
    log.record("/messagegroups/g", "group", "updated", ["description"])
    log.record("/messagegroups/g/messages/m", "resource", "created")
    events = build_events(log, BASE, "2026-01-01T00:00:00Z")
    assert len({e["xregcorrelationid"] for e in events if "xregcorrelationid" in e}) == 1
    update = next(e for e in events if e["type"] == "io.xregistry.group.updated")
    assert update["data"] == {"changed": ["description"]}
    assert len({e["id"] for e in events}) == len(events) == 4


def test_document_headers_round_trip(client: TestClient) -> None:
    """The xRegistry-* headers of a document GET can be sent back with a PUT (computed ones ignored)."""
    headers = {
        "content-type": "application/json",
        "xRegistry-format": "JsonSchema/draft-07",
        "xRegistry-labels-team": "a",
    }
    client.put("/schemagroups/s/schemas/o", content=b"{}", headers=headers)
    got = client.get("/schemagroups/s/schemas/o")
    assert got.headers["xregistry-labels-team"] == "a"
    back = {k: v for k, v in got.headers.items() if k.startswith("xregistry-")}
    back["xregistry-description"] = "with%20a%20space"
    r = client.put(
        "/schemagroups/s/schemas/o", content=b'{"a": 1}', headers={**back, "content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    assert r.headers["xregistry-description"] == "with%20a%20space"
    details = client.get("/schemagroups/s/schemas/o$details").json()
    assert details["description"] == "with a space"
    assert details["labels"] == {"team": "a"}
    assert details["epoch"] == 2
    stale = client.put("/schemagroups/s/schemas/o", content=b"{}", headers=back)
    assert stale.json()["type"] == CORE + "mismatched_epoch"
    # headers are patch-like: a PUT of the document alone keeps the attributes
    array = b'{"type": "array"}'
    r = client.put("/schemagroups/s/schemas/o", content=array, headers={"content-type": "application/json"})
    assert (r.headers["xregistry-format"], r.headers["xregistry-labels-team"]) == ("JsonSchema/draft-07", "a")


def test_locked_database_is_server_busy(tmp_path: Path) -> None:
    """A database locked (by another process) past the busy timeout is 503 server_busy with
    Retry-After and the cause, and nothing of the write remains (core spec errors: server_busy)."""
    import sqlite3

    storage = create_storage(tmp_path / "b.db", StorageOptions(busy_timeout=0.2))
    with make_client(RegistryComponent(storage.registry, BASE), storage) as client:
        blocker = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            r = client.put("/messagegroups/g", json={"description": "x"})
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert (r.status_code, r.headers["retry-after"]) == (503, "1")
        assert r.json()["type"] == CORE + "server_busy"
        assert "database locked" in r.json()["detail"]
        assert client.get("/messagegroups/g").status_code == 404
        assert client.put("/messagegroups/g", json={"description": "x"}).status_code in (200, 201)


def test_registry_entity_writes(client: TestClient, ingestor: RecordingIngestor) -> None:
    """PUT/PATCH / change the registry's own attributes; registryid and specversion stay the server's."""
    root = client.get("/").json()
    r = client.patch("/", json={"name": "Orders registry", "registryid": "other", "labels": {"env": "test"}})
    assert r.status_code == 200
    body = r.json()
    assert (body["name"], body["labels"], body["registryid"]) == (
        "Orders registry",
        {"env": "test"},
        root["registryid"],
    )
    assert body["epoch"] == root["epoch"] + 1
    assert "io.xregistry.registry.updated" in ingestor.types_for("/")
    r = client.put("/", json={"description": "replaced"})
    assert "name" not in r.json()  # PUT replaces
    assert client.put("/", json={"specversion": "0.5"}).json()["type"] == CORE + "unsupported_specversion"


def test_delete_versions_by_id_and_doc_view_of_a_group(client: TestClient) -> None:
    """DELETE on a versions collection with ids; ?doc on one group gives pointers relative to it."""
    headers = {"content-type": "application/json"}
    for _ in range(3):
        client.post("/schemagroups/s/schemas/o", content=b"{}", headers=headers)
    r = client.request(
        "DELETE", "/schemagroups/s/schemas/o/versions", content=json.dumps({"1": {}, "2": {"epoch": 1}})
    )
    assert r.status_code == 204
    assert list(client.get("/schemagroups/s/schemas/o/versions").json()) == ["3"]
    doc = client.get("/schemagroups/s?doc&inline=schemas.versions").json()
    assert doc["self"] == "#"
    assert doc["schemasurl"] == "#/schemas"
    res = doc["schemas"]["o"]
    assert res["self"] == "#/schemas/o"
    # inlined versions come without versionsurl/versionscount in document view (docs/registry.md)
    assert "versionsurl" not in res
    assert "versionscount" not in res
    assert res["versions"]["3"]["self"] == "#/schemas/o/versions/3"
    assert "format" not in res
    assert "versionid" not in res
