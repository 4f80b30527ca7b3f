"""The representative xRegistry HTTP cases: root, model, writes with epochs, versions, documents,
import and export, filters, deletes and the error types (core spec + HTTP binding)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import httpx2
from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from registry.support import BASE, SCENARIOS

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
HTTP = "https://github.com/xregistry/spec/blob/main/core/http.md#"
LINK = f"<{BASE}/>;rel=xregistry-root"


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _problem(resp: httpx2.Response, status: int, type_uri: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = resp.json()
    assert body["type"] == type_uri, body
    assert resp.headers["link"] == LINK
    return body


def test_root_document(client: TestClient) -> None:
    """Case 1 (core spec, Registry entity): root attributes, per-group url and count, Link header."""
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["link"] == LINK
    body = r.json()
    assert body["specversion"] == "1.0-rc2"
    assert body["registryid"]
    assert body["self"] == BASE + "/"
    assert body["xid"] == "/"
    assert isinstance(body["epoch"], int)
    assert _ts(body["createdat"]) <= _ts(body["modifiedat"])
    for plural in ("messagegroups", "schemagroups"):
        assert body[f"{plural}url"] == f"{BASE}/{plural}"
        assert body[f"{plural}count"] == 0
    assert body["endpointsurl"] == f"{BASE}/endpoints"
    assert body["endpointscount"] == 2  # the broker's own endpoints
    for key in ("capabilities", "model", "modelsource", "messagegroups"):
        assert key not in body


def test_capabilities_and_model(client: TestClient) -> None:
    """Case 2 (HTTP binding, /capabilities and /model): capability map, inline=capabilities, model."""
    caps = client.get("/capabilities").json()
    assert caps["available"]["model"] == {"mutable": False}
    assert {"capabilities", "entities", "model"} <= set(caps["available"])
    assert caps["specversions"] == ["1.0-rc2"]
    assert {"inline", "filter", "doc", "epoch"} <= set(caps["flags"])
    assert client.get("/?inline=capabilities").json()["capabilities"] == caps
    model = client.get("/model").json()
    messages = model["groups"]["messagegroups"]["resources"]["messages"]
    assert messages["maxversions"] == 1
    assert messages["hasdocument"] is False
    assert model["groups"]["schemagroups"]["resources"]["schemas"]["hasdocument"] is True
    assert client.get("/?inline=model").json()["model"] == model
    assert client.get("/modelsource").json() == {}


def test_group_create_then_replace_moves_epoch(client: TestClient) -> None:
    """Case 3 (core spec, PUT creates with 201 + Location, then replaces with the epoch + 1)."""
    r = client.put("/messagegroups/g1", json={"envelope": "CloudEvents/1.0"})
    assert r.status_code == 201
    assert r.headers["location"] == f"{BASE}/messagegroups/g1"
    body = r.json()
    assert body["messagegroupid"] == "g1"
    assert body["xid"] == "/messagegroups/g1"
    assert body["epoch"] == 1
    assert body["envelope"] == "CloudEvents/1.0"
    assert body["messagesurl"] == f"{BASE}/messagegroups/g1/messages"
    assert body["messagescount"] == 0
    r = client.put("/messagegroups/g1", json={"envelope": "CloudEvents/1.0"})
    assert r.status_code == 200
    assert r.json()["epoch"] == 2
    assert _ts(r.json()["modifiedat"]) > _ts(body["modifiedat"])
    assert client.get("/").json()["messagegroupscount"] == 1


def test_message_create(client: TestClient) -> None:
    """Case 4 (Message Definitions 1.0-rc2 + core versions): a message is a resource with version "1"."""
    client.put("/messagegroups/g1", json={"envelope": "CloudEvents/1.0"})
    group_epoch = client.get("/messagegroups/g1").json()["epoch"]
    r = client.put(
        "/messagegroups/g1/messages/com.example.created",
        json={
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.created"}},
            "dataschemaformat": "JsonSchema/draft-07",
            "dataschemauri": "/schemagroups/s/schemas/order",
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["messageid"] == "com.example.created"
    assert body["versionid"] == "1"
    assert body["isdefault"] is True
    assert body["ancestorid"] == "1"
    assert body["self"] == f"{BASE}/messagegroups/g1/messages/com.example.created"
    assert body["metaurl"].endswith("/com.example.created/meta")
    assert body["versionsurl"].endswith("/com.example.created/versions")
    assert body["versionscount"] == 1
    group = client.get("/messagegroups/g1").json()
    assert group["messagescount"] == 1
    assert group["epoch"] == group_epoch + 1


def test_mismatched_epoch(client: TestClient) -> None:
    """Case 5 (core spec, epoch): a stale epoch is refused with its args and nothing changes."""
    client.put("/messagegroups/g1", json={"envelope": "CloudEvents/1.0"})
    before = client.get("/messagegroups/g1").json()
    body = _problem(client.put("/messagegroups/g1", json={"epoch": 99}), 400, CORE + "mismatched_epoch")
    assert body["subject"] == "/messagegroups/g1"
    assert body["args"] == {"bad_epoch": "99", "epoch": str(before["epoch"])}
    assert client.get("/messagegroups/g1").json() == before
    ok = client.put("/messagegroups/g1", json={"epoch": before["epoch"], "envelope": "CloudEvents/1.0"})
    assert ok.status_code == 200


def test_error_types(client: TestClient) -> None:
    """Case 6 (HTTP binding errors): action_not_supported + Allow, not_found, malformed_id, missing_body."""
    r = client.put("/messagegroups", json={})
    _problem(r, 405, HTTP + "action_not_supported")
    assert "POST" in r.headers["allow"]
    client.put("/messagegroups/g1", json={})
    _problem(client.get("/messagegroups/G1"), 404, CORE + "not_found")
    _problem(client.put("/messagegroups/bad id!", json={}), 400, CORE + "malformed_id")
    _problem(client.post("/messagegroups", content=b""), 400, HTTP + "missing_body")
    _problem(client.post("/messagegroups", content=b"{nope"), 400, CORE + "parsing_data")
    assert client.post("/messagegroups", json={}).json() == {}
    _problem(client.put("/messagegroups/g1", json={"messagegroupid": "g2"}), 400, CORE + "mismatched_id")
    _problem(client.put("/messagegroups/G1", json={}), 400, CORE + "bad_request")  # ids ignore case
    _problem(client.put("/messagegroups/g1", json={"labels": {"a": 1}}), 400, CORE + "invalid_attribute")
    _problem(client.get("/messagegroups/g1$details"), 400, HTTP + "bad_details")
    _problem(client.get("/?specversion=0.1"), 400, CORE + "unsupported_specversion")
    _problem(client.get("/messagegroups?inline=nope.*.x"), 400, CORE + "bad_inline")
    _problem(client.get("/messagegroups?inline=schemas"), 400, CORE + "bad_inline")  # not below messagegroups
    assert client.get("/messagegroups?inline=messages.versions").status_code == 200
    assert client.get("/?inline=schemagroups.schemas.versions.schema,model").status_code == 200
    _problem(client.get("/messagegroups?filter=a=b,"), 400, CORE + "bad_filter")
    _problem(client.get("/messagegroups/g1/nothing"), 404, CORE + "not_found")


def test_schema_document_and_details(client: TestClient) -> None:
    """Case 7 (core spec, document resources): raw body echoed with xRegistry-* headers; $details is JSON."""
    schema = b'{"type": "object", "properties": {"a": {"type": "string"}}}'
    r = client.put(
        "/schemagroups/s/schemas/order",
        content=schema,
        headers={"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"},
    )
    assert r.status_code == 201, r.text
    assert r.content == schema
    assert r.headers["xregistry-schemaid"] == "order"
    assert r.headers["xregistry-versionid"] == "1"
    assert r.headers["xregistry-epoch"] == "1"
    assert r.headers["xregistry-format"] == "JsonSchema/draft-07"
    assert r.headers["location"] == f"{BASE}/schemagroups/s/schemas/order"
    assert r.headers["content-location"] == f"{BASE}/schemagroups/s/schemas/order/versions/1"
    got = client.get("/schemagroups/s/schemas/order")
    assert got.content == schema
    assert got.headers["content-type"].startswith("application/json")
    details = client.get("/schemagroups/s/schemas/order$details").json()
    assert details["self"] == f"{BASE}/schemagroups/s/schemas/order$details"
    assert details["format"] == "JsonSchema/draft-07"
    assert "schema" not in details
    inlined = client.get("/schemagroups/s/schemas/order$details?inline=schema").json()
    assert inlined["schema"] == json.loads(schema)
    _problem(client.patch("/schemagroups/s/schemas/order", json={}), 405, HTTP + "details_required")
    _problem(
        client.put("/schemagroups/s/schemas/order$details", json={}, headers={"xRegistry-name": "x"}),
        400,
        HTTP + "extra_xregistry_header",
    )
    patched = client.patch("/schemagroups/s/schemas/order$details", json={"description": "orders"})
    assert patched.status_code == 200
    assert patched.json()["description"] == "orders"
    assert client.get("/schemagroups/s/schemas/order").content == schema  # the document is kept


def test_versions_and_sticky_default(client: TestClient) -> None:
    """Case 8 (core spec, default version): newest is default until defaultversionid pins one."""
    headers = {"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"}
    client.put("/schemagroups/s/schemas/order", content=b'{"type": "object"}', headers=headers)
    r = client.post("/schemagroups/s/schemas/order", content=b'{"type": "array"}', headers=headers)
    assert r.status_code == 201
    assert r.headers["xregistry-versionid"] == "2"
    assert r.headers["xregistry-ancestorid"] == "1"
    meta = client.get("/schemagroups/s/schemas/order/meta").json()
    assert meta["defaultversionid"] == "2"
    assert meta["defaultversionsticky"] is False
    assert client.get("/schemagroups/s/schemas/order").content == b'{"type": "array"}'
    r = client.patch("/schemagroups/s/schemas/order/meta", json={"defaultversionid": "1"})
    assert r.status_code == 200
    assert r.json()["defaultversionsticky"] is True
    versions = client.get("/schemagroups/s/schemas/order/versions").json()
    assert {v: versions[v]["isdefault"] for v in versions} == {"1": True, "2": False}
    assert client.get("/schemagroups/s/schemas/order$details").json()["versionscount"] == 2
    client.post("/schemagroups/s/schemas/order", content=b'{"type": "string"}', headers=headers)
    assert client.get("/schemagroups/s/schemas/order/meta").json()["defaultversionid"] == "1"  # still sticky
    _problem(
        client.patch("/schemagroups/s/schemas/order/meta", json={"defaultversionid": "9"}),
        400,
        CORE + "unknown_id",
    )
    client.patch("/schemagroups/s/schemas/order/meta", json={"defaultversionid": None})
    assert client.get("/schemagroups/s/schemas/order/meta").json()["defaultversionid"] == "3"
    r = client.post("/schemagroups/s/schemas/order?setdefaultversionid=2", content=b"{}", headers=headers)
    assert client.get("/schemagroups/s/schemas/order/meta").json()["defaultversionid"] == "2"
    # deleting the pinned version falls back to the newest
    assert client.delete("/schemagroups/s/schemas/order/versions/2").status_code == 204
    meta = client.get("/schemagroups/s/schemas/order/meta").json()
    assert (meta["defaultversionid"], meta["defaultversionsticky"]) == ("4", False)


@XREGISTRY_SAMPLES.needed
def test_import_filter_export(client: TestClient) -> None:
    """Case 9 (HTTP binding POST /, ?filter, /export): import, groups_only, filtered reads, export view."""
    doc = json.loads((SCENARIOS / "contoso-erp-jsons07.xreg.json").read_text())
    r = client.post("/", json=doc)
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"endpoints", "messagegroups", "schemagroups"}
    assert set(r.json()["messagegroups"]) == set(doc["messagegroups"])
    _problem(client.post("/", json={"name": "x"}), 400, CORE + "groups_only")
    got = client.get(
        "/messagegroups?inline=messages&filter=messages.messageid=Contoso.ERP.ReservationPlaced"
    ).json()
    assert list(got) == ["Contoso.ERP.ReservationEvents"]
    assert list(got["Contoso.ERP.ReservationEvents"]["messages"]) == ["Contoso.ERP.ReservationPlaced"]
    assert got["Contoso.ERP.ReservationEvents"]["messagescount"] == 1
    wild = client.get("/messagegroups?filter=messagegroupid=contoso.erp.p*").json()
    assert set(wild) == {
        "Contoso.ERP.PaymentEvents",
        "Contoso.ERP.ProductEvents",
        "Contoso.ERP.PurchasingEvents",
    }
    either = client.get("/messagegroups?filter=messagegroupid=x&filter=description=*shipping*").json()
    assert list(either) == ["Contoso.ERP.ShippingEvents"]
    _problem(
        client.get("/messagegroups/Contoso.ERP.ReservationEvents?filter=messagegroupid=nope"),
        404,
        CORE + "not_found",
    )
    export = client.get("/export").json()
    assert export == client.get("/?doc&inline=*,capabilities,modelsource").json()
    assert export["self"] == "#"
    group = export["messagegroups"]["Contoso.ERP.ReservationEvents"]
    assert group["self"] == "#/messagegroups/Contoso.ERP.ReservationEvents"
    assert group["messagesurl"] == "#/messagegroups/Contoso.ERP.ReservationEvents/messages"
    assert "model" not in export
    message = group["messages"]["Contoso.ERP.ReservationPlaced"]
    assert "envelope" not in message  # document view: the default version's attributes sit in versions
    assert message["versions"]["1"]["envelope"] == "CloudEvents/1.0"
    assert re.fullmatch(r"#/messagegroups/.+/versions/1", message["meta"]["defaultversionurl"])


def test_deletes(client: TestClient) -> None:
    """Case 10 (core spec, delete): epoch check, 204, 404, collection delete ignoring unknown ids, 405s."""
    client.put("/messagegroups/g1", json={})
    client.put("/messagegroups/g1", json={})
    client.put("/messagegroups/g2", json={})
    client.put("/messagegroups/g3/messages/m1", json={})
    _problem(client.delete("/messagegroups/g1?epoch=1"), 400, CORE + "mismatched_epoch")
    assert client.delete("/messagegroups/g1?epoch=2").status_code == 204
    _problem(client.delete("/messagegroups/g1"), 404, CORE + "not_found")
    r = client.request("DELETE", "/messagegroups", content=json.dumps({"g2": {}, "nope": {}}))
    assert r.status_code == 204
    assert set(client.get("/messagegroups").json()) == {"g3"}
    _problem(
        client.request("DELETE", "/messagegroups/g3/messages", content=json.dumps({"m1": {"epoch": 1}})),
        400,
        CORE + "misplaced_epoch",
    )
    _problem(client.delete("/"), 405, HTTP + "action_not_supported")
    _problem(client.delete("/messagegroups/g3/messages/m1/meta"), 405, HTTP + "action_not_supported")
    assert client.delete("/messagegroups/g3/messages/m1").status_code == 204
    assert client.get("/messagegroups/g3").json()["messagescount"] == 0
    assert client.delete("/messagegroups").status_code == 204
    assert client.get("/messagegroups").json() == {}


def test_lookups_by_uri(client: TestClient) -> None:
    """Schema Registry API 0.2 section 3.4.3 and Message Catalog 4.4.3: lookups by URI."""
    headers = {"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"}
    client.put("/schemagroups/s/schemas/order", content=b'{"type": "object"}', headers=headers)
    client.post("/schemagroups/s/schemas/order", content=b'{"type": "array"}', headers=headers)
    r = client.get("/schema", params={"uri": f"{BASE}/schemagroups/s/schemas/order/versions/1"})
    assert r.status_code == 200
    assert r.content == b'{"type": "object"}'
    assert r.headers["xregistry-format"] == "JsonSchema/draft-07"
    assert (
        client.get("/schema", params={"uri": "/schemagroups/s/schemas/order"}).content == b'{"type": "array"}'
    )
    _problem(client.get("/schema", params={"uri": "https://elsewhere.example/x"}), 404, CORE + "not_found")
    _problem(client.get("/schema"), 400, CORE + "bad_request")
    client.put("/messagegroups/g/messages/m", json={"description": "d"})
    msg = client.get("/messagedefinition", params={"uri": f"{BASE}/messagegroups/g/messages/m"}).json()
    assert (msg["messageid"], msg["description"]) == ("m", "d")


def test_options_and_unsupported_methods(client: TestClient) -> None:
    """HTTP binding: OPTIONS lists the methods; /model is read-only."""
    r = client.options("/messagegroups")
    assert r.status_code == 204
    assert r.headers["allow"] == r.headers["access-control-allow-methods"]
    assert "POST" in r.headers["allow"]
    _problem(client.put("/model", json={}), 405, HTTP + "action_not_supported")
