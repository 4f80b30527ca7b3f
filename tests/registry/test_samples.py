"""The spec's sample registries: import each, export, get the same definitions back; invalid
documents are refused with every reason (Message Definitions 1.0-rc2, Endpoint and Schema
extensions; HTTP binding ``POST /`` and ``GET /export``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cefilters.dialects import DIALECTS
from ceprotocols import SENDERS
from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from cebroker.registry.versions import VALIDATION_ATTRS
from registry.support import SCENARIOS, make_client, new_registry

SAMPLE_FILES = XREGISTRY_SAMPLES.files("cloudevents/samples/scenarios/*.xreg.json")
#: attributes the server adds or computes; everything else must come back unchanged
SERVER_ADDED = frozenset(
    {"self", "xid", "epoch", "createdat", "modifiedat", "isdefault", "ancestorid", "contenttype", "versionid"}
    | set(VALIDATION_ATTRS)
)
GROUP_CHILDREN = {"endpoints": "messages", "messagegroups": "messages", "schemagroups": "schemas"}


def _clean(attrs: dict[str, Any], id_attr: str) -> dict[str, Any]:
    return {
        k: v
        for k, v in attrs.items()
        if k not in SERVER_ADDED
        and k != id_attr
        and not k.endswith(("url", "count"))
        and k not in ("meta", "versions", "messages", "schemas", "defaultversionid", "defaultversionsticky")
        or k == "schemaurl"
    }


def definitions(doc: dict[str, Any], *, exported: bool) -> dict[str, Any]:
    """Every definition of a document as ``{xid: attributes}``; a resource's attributes are its
    default version's (or, with explicit versions, each version's) — the form both an imported
    sample and an export can be brought to."""
    out: dict[str, Any] = {}
    for plural, child in GROUP_CHILDREN.items():
        for gid, group in doc.get(plural, {}).items():
            out[f"/{plural}/{gid}"] = _clean(group, plural[:-1] + "id")
            rid_attr = child[:-1] + "id"
            for rid, res in group.get(child, {}).items():
                xid = f"/{plural}/{gid}/{child}/{rid}"
                default = (res.get("meta") or {}).get("defaultversionid", res.get("defaultversionid"))
                if exported:
                    if "versions" in res and res["versions"]:
                        out[xid + "#default"] = default
                        for vid, v in res["versions"].items():
                            out[f"{xid}/versions/{vid}"] = _clean(v, rid_attr)
                elif res.get("versions"):
                    # unless pinned, the default is the newest: the last one listed
                    out[xid + "#default"] = default if default is not None else list(res["versions"])[-1]
                    for vid, v in res["versions"].items():
                        out[f"{xid}/versions/{vid}"] = _clean(v, rid_attr)
                else:
                    out[xid + "#default"] = "1"
                    out[f"{xid}/versions/1"] = _clean(res, rid_attr)
    return out


@XREGISTRY_SAMPLES.needed
@pytest.mark.parametrize("sample", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_sample_round_trip(client: TestClient, sample: Path) -> None:
    """Importing a sample (POST /) and exporting it gives back the same definitions."""
    doc = json.loads(sample.read_text())
    r = client.post("/", json=doc)
    assert r.status_code == 200, r.text[:2000]
    export = client.get("/export").json()
    want = definitions(doc, exported=False)
    got = definitions(export, exported=True)
    for key in list(got):
        if key.startswith("/endpoints/cebroker."):
            del got[key]  # the broker's own endpoints
    assert got == want


@XREGISTRY_SAMPLES.needed
def test_all_samples_together(client: TestClient) -> None:
    """Every sample imported into one registry; groups from all of them coexist, counts add up."""
    total = 0
    for sample in SAMPLE_FILES:
        doc = json.loads(sample.read_text())
        assert client.post("/", json=doc).status_code == 200
        total += len(doc["messagegroups"])
    assert client.get("/").json()["messagegroupscount"] == total
    assert len(SAMPLE_FILES) == 9


@XREGISTRY_SAMPLES.needed
def test_reimport_is_an_update(client: TestClient) -> None:
    """Importing the same document twice updates in place (POST upserts, never duplicates)."""
    doc = json.loads((SCENARIOS / "lightbulb-avro.xreg.json").read_text())
    client.post("/", json=doc)
    first = client.get("/export").json()
    assert client.post("/", json=doc).status_code == 200
    second = client.get("/export").json()
    assert definitions(first, exported=True) == definitions(second, exported=True)
    gid = next(iter(doc["messagegroups"]))
    assert second["messagegroups"][gid]["epoch"] == first["messagegroups"][gid]["epoch"] + 1


def _errors(resp: Any) -> dict[str, str]:
    assert resp.status_code == 400, resp.text
    return {e["pointer"]: e["detail"] for e in resp.json()["errors"]}


def test_invalid_message_definitions_refused_with_reasons(client: TestClient) -> None:
    """Built-in rules of Message Definitions 1.0-rc2: every problem reported, nothing stored."""
    doc = {
        "messagegroups": {
            "g": {
                "envelope": "CloudEvents/1.0",
                "messages": {
                    "a": {"envelope": "CloudEvents/1.0"},
                    "b": {
                        "envelope": "CloudEvents/1.0",
                        "envelopemetadata": {"id": {"required": False}, "specversion": {"value": "0.3"}},
                    },
                    "c": {"dataschema": {}, "dataschemauri": "/x"},
                    "d": {"envelope": "MQTT/5.0", "envelopemetadata": {}},
                },
            }
        }
    }
    errors = _errors(client.post("/", json=doc))
    base = "/messagegroups/g/messages"
    assert f"{base}/a/versions/1/envelopemetadata" in errors
    assert f"{base}/b/versions/1/envelopemetadata/id/required" in errors
    assert f"{base}/b/versions/1/envelopemetadata/specversion/value" in errors
    assert f"{base}/c/versions/1/dataschema" in errors
    assert f"{base}/c/versions/1/dataschemaformat" in errors
    assert f"{base}/d/versions/1/envelope" in errors
    assert client.get("/messagegroups").json() == {}  # the import was atomic


@XREGISTRY_SAMPLES.needed
def test_document_schema_violations_refused(client: TestClient) -> None:
    """The spec's CloudEvents registry document schema is applied to imports."""
    doc = {
        "messagegroups": {"g": {"messages": {"m": {"envelope": "CloudEvents/1.0", "envelopemetadata": 5}}}}
    }
    r = client.post("/", json=doc)
    errors = _errors(r)
    assert any(p.startswith("/messagegroups/g/messages/m") for p in errors), errors
    assert "schema" in r.json()["detail"]


def test_invalid_group_attributes_refused(client: TestClient) -> None:
    """Group extension attributes have their model types (envelope, protocol, format are strings)."""
    errors = _errors(client.put("/messagegroups/g", json={"envelope": 1, "protocol": ["x"]}))
    assert set(errors) == {"/messagegroups/g/envelope", "/messagegroups/g/protocol"}
    assert "/schemagroups/s/format" in _errors(client.put("/schemagroups/s", json={"format": {}}))


def test_registry_shares_the_broker_database(tmp_path: Path, client: TestClient) -> None:
    """The registry lives in the broker's SQLite file, in its own table, in WAL mode."""
    import sqlite3

    client.put("/messagegroups/g", json={})
    conn = sqlite3.connect(tmp_path / "cebroker.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = conn.execute("SELECT xid FROM xreg_entity WHERE kind = 'group'").fetchall()
    finally:
        conn.close()
    assert ("/messagegroups/g",) in rows


def test_invalid_endpoint_refused(client: TestClient) -> None:
    """Endpoint extension: usage is required, one value except subscriber+consumer for MQTT/AMQP/NATS."""
    errors = _errors(client.put("/endpoints/e", json={"protocol": "HTTP"}))
    assert "/endpoints/e/usage" in errors
    errors = _errors(
        client.put("/endpoints/e", json={"protocol": "HTTP", "usage": ["subscriber", "consumer"]})
    )
    assert "/endpoints/e/usage" in errors
    ok = client.put("/endpoints/e", json={"protocol": "MQTT/5.0", "usage": ["subscriber", "consumer"]})
    assert ok.status_code == 201


def test_broker_endpoints_advertised(client: TestClient) -> None:
    """The broker's subscription manager and ingress are endpoints linked to every message group."""
    client.put("/messagegroups/g1", json={})
    sub = client.get("/endpoints/cebroker.subscriptions").json()
    assert sub["usage"] == ["subscriber"]
    assert sub["protocol"] == "HTTP"
    assert sub["protocoloptions"]["endpoints"] == [{"uri": "http://testserver/subscriptions"}]
    assert sub["subscriptiondialects"] == list(DIALECTS)  # what the broker's filter compiler accepts
    assert {"exact", "prefix", "suffix", "all", "any", "not", "sql"} <= set(sub["subscriptiondialects"])
    assert sub["subscriptionprotocols"] == list(SENDERS)  # what a subscription's protocol may be
    assert "HTTP" in sub["subscriptionprotocols"]
    assert sub["messagegroups"] == ["/messagegroups/g1"]
    ingress = client.get("/endpoints/cebroker.events").json()
    assert ingress["protocoloptions"]["endpoints"] == [{"uri": "http://testserver/events"}]
    assert ingress["messagegroups"] == ["/messagegroups/g1"]
    # deleting one brings it back; a deleted group disappears from the links
    assert client.delete("/endpoints/cebroker.events").status_code == 204
    client.delete("/messagegroups/g1")
    assert client.get("/endpoints/cebroker.events").json()["messagegroups"] == []


@XREGISTRY_SAMPLES.needed
def test_message_document_schema_applies_too(tmp_path: Path) -> None:
    """The message-only document schema of the spec can be configured instead: every sample's
    message groups conform to it, and a violation is refused with its pointer."""
    schema = SCENARIOS.parents[2] / "schemas" / "message-document-schema.json"
    with make_client(*new_registry(tmp_path / "m.db", "http://testserver", document_schema=schema)) as c:
        for sample in SAMPLE_FILES:
            groups = json.loads(sample.read_text())["messagegroups"]
            assert c.post("/", json={"messagegroups": groups}).status_code == 200, sample.name
        bad = {"messagegroups": {"g": {"messages": {"m": {"dataschemauri": 7}}}}}
        errors = _errors(c.post("/", json=bad))
        assert "/messagegroups/g/messages/m/dataschemauri" in errors
