"""``meta.xref`` (xRegistry core): a resource that shows another resource's versions instead
of its own, set and removed through its meta, refused when it names nothing of its type."""

from __future__ import annotations

from starlette.testclient import TestClient

from cebroker.registry.component import RegistryComponent

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
JSON = {"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"}


def test_xref_shows_the_target_and_removing_it_gives_a_version(client: TestClient) -> None:
    client.put("/schemagroups/g/schemas/target", content=b'{"type": "object"}', headers=JSON)
    client.post("/schemagroups/g/schemas/target", content=b'{"type": "array"}', headers=JSON)
    client.put("/schemagroups/h/schemas/alias", content=b'{"type": "string"}', headers=JSON)
    r = client.patch("/schemagroups/h/schemas/alias/meta", json={"xref": "/schemagroups/g/schemas/target"})
    assert r.status_code == 200, r.text
    assert r.json()["xref"] == "/schemagroups/g/schemas/target"
    # its own version is gone; it shows the target's default version and versions
    details = client.get("/schemagroups/h/schemas/alias$details?inline=versions").json()
    assert details["schemaid"] == "alias"
    assert details["xid"] == "/schemagroups/h/schemas/alias"
    assert details["versionid"] == "2"
    assert set(details["versions"]) == {"1", "2"}
    assert client.get("/schemagroups/h/schemas/alias").content == b'{"type": "array"}'
    # no versions of its own can be written
    r = client.post("/schemagroups/h/schemas/alias", content=b"{}", headers=JSON)
    assert r.status_code == 400
    # the export carries the xref, not the target's versions; an import restores it
    export = client.get("/export").json()
    alias = export["schemagroups"]["h"]["schemas"]["alias"]
    assert alias["meta"]["xref"] == "/schemagroups/g/schemas/target"
    assert alias["versions"] == {}
    # removing it gives the resource a version of its own again
    r = client.patch("/schemagroups/h/schemas/alias/meta", json={"xref": None})
    assert r.status_code == 200, r.text
    versions = client.get("/schemagroups/h/schemas/alias/versions").json()
    assert list(versions) == ["1"]
    assert "xref" not in client.get("/schemagroups/h/schemas/alias/meta").json()


def test_bad_xrefs_are_refused(client: TestClient) -> None:
    client.put("/schemagroups/g/schemas/s", content=b"{}", headers=JSON)
    client.put("/messagegroups/m/messages/x", json={})
    for xref, code in (
        ("/schemagroups/g/schemas/nope", "unknown_id"),
        ("/messagegroups/m/messages/x", "invalid_attribute"),
        ("/schemagroups/g/schemas/s", "invalid_attribute"),
        ("not an xid", "invalid_attribute"),
    ):
        r = client.patch("/schemagroups/g/schemas/s/meta", json={"xref": xref})
        assert r.status_code == 400, xref
        assert r.json()["type"] == CORE + code, xref
    assert "xref" not in client.get("/schemagroups/g/schemas/s/meta").json()
    assert list(client.get("/schemagroups/g/schemas/s/versions").json()) == ["1"]


def test_a_message_with_an_xref_validates_as_its_target(
    client: TestClient, component: RegistryComponent
) -> None:
    """The definition index takes the target's definition under the alias's id."""
    client.put(
        "/messagegroups/m/messages/com.example.a",
        json={"envelope": "CloudEvents/1.0", "envelopemetadata": {"source": {"value": "/only"}}},
    )
    client.put("/messagegroups/m/messages/com.example.b", json={})
    event = {"specversion": "1.0", "id": "1", "type": "com.example.b", "source": "/other"}
    assert component.validator.validate(event) == []
    target = {"xref": "/messagegroups/m/messages/com.example.a"}
    r = client.patch("/messagegroups/m/messages/com.example.b/meta", json=target)
    assert r.status_code == 200, r.text
    assert [v.pointer for v in component.validator.validate(event)] == ["/source"]
