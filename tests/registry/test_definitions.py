"""Message definitions: 0.5-wip spellings on input (Message Definitions 0.5-wip), ``basemessage``
chains (1.0-rc2, ``basemessage``: merge rule, dangling references, cycles), and the validator's
rules (1.0-rc2, "Common properties": required, value, type, URI-template placeholders)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cebroker.registry.basemessage import merge, resolve
from cebroker.registry.validation import Definition, template_regex

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"


def test_old_spellings_stored_in_the_new_form(client: TestClient) -> None:
    """0.5-wip ``basemessageurl``, ``schemaformat``, ``schema``, ``schemauri`` become 1.0-rc2 names."""
    r = client.put(
        "/messagegroups/g/messages/old",
        json={
            "basemessageurl": "/messagegroups/g/messages/base",
            "schemaformat": "JsonSchema/draft-07",
            "schemauri": "/schemagroups/s/schemas/x",
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["basemessage"] == "/messagegroups/g/messages/base"
    assert body["dataschemaformat"] == "JsonSchema/draft-07"
    assert body["dataschemauri"] == "/schemagroups/s/schemas/x"
    for old in ("basemessageurl", "schemaformat", "schemauri"):
        assert old not in body
    r = client.put(
        "/messagegroups/g/messages/inline", json={"schemaformat": "JsonSchema/draft-07", "schema": {}}
    )
    assert r.json()["dataschema"] == {}
    # the model.json spelling, and the wrapped envelopemetadata of one spec sentence
    r = client.put(
        "/messagegroups/g/messages/rc4",
        json={
            "basemessageuri": "/x",
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"attributes": {"id": {}}},
        },
    )
    assert r.json()["basemessage"] == "/x"
    assert r.json()["envelopemetadata"] == {"id": {}}


def test_both_spellings_at_once_refused(client: TestClient) -> None:
    """Giving one attribute under its old and new name is ambiguous: invalid_attribute."""
    r = client.put("/messagegroups/g/messages/m", json={"schemauri": "/a", "dataschemauri": "/b"})
    assert r.status_code == 400
    assert r.json()["type"] == CORE + "invalid_attribute"


def test_old_spellings_in_an_import(client: TestClient) -> None:
    """POST / accepts 0.5-wip documents too; the export shows only 1.0-rc2 names."""
    doc = {"messagegroups": {"g": {"messages": {"m": {"schemaformat": "Avro/1.9", "schemauri": "/s"}}}}}
    assert client.post("/", json=doc).status_code == 200
    version = client.get("/export").json()["messagegroups"]["g"]["messages"]["m"]["versions"]["1"]
    assert (version["dataschemaformat"], version["dataschemauri"]) == ("Avro/1.9", "/s")
    assert "schemauri" not in version


def test_merge_rule() -> None:
    """Maps merge recursively; a scalar over a map replaces the whole map."""
    base = {"a": {"x": 1, "y": {"z": 2}}, "b": {"k": 1}, "c": 1}
    over = {"a": {"y": {"w": 3}}, "b": "scalar", "d": 4}
    assert merge(base, over) == {"a": {"x": 1, "y": {"z": 2, "w": 3}}, "b": "scalar", "c": 1, "d": 4}


def test_chain_resolution_with_dangling_reference_and_cycle() -> None:
    """Follow the chain to its end and merge back; a missing base ends it, a cycle never loops."""
    messages: dict[str, dict[str, Any]] = {
        "/g/messages/root": {"envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}},
        "/g/messages/mid": {
            "basemessage": "/g/messages/root",
            "envelopemetadata": {"source": {"value": "/m"}},
        },
        "/g/messages/leaf": {"basemessage": "/g/messages/mid", "description": "leaf"},
        "/g/messages/dangling": {"basemessage": "/g/messages/nowhere", "description": "d"},
        "/g/messages/pointer": {"basemessage": "#/g/messages/root"},
        "/g/messages/a": {"basemessage": "/g/messages/b", "x": "a"},
        "/g/messages/b": {"basemessage": "/g/messages/a", "x": "b", "y": "b"},
    }
    leaf = resolve(messages["/g/messages/leaf"], messages.get, "/g/messages/leaf")
    assert leaf["envelopemetadata"] == {"type": {"value": "t"}, "source": {"value": "/m"}}
    assert leaf["description"] == "leaf"
    assert leaf["basemessage"] == "/g/messages/mid"  # its own attributes stay its own
    assert resolve(messages["/g/messages/dangling"], messages.get)["description"] == "d"
    assert resolve(messages["/g/messages/pointer"], messages.get)["envelopemetadata"]["type"] == {
        "value": "t"
    }
    cyc = resolve(messages["/g/messages/a"], messages.get, "/g/messages/a")
    assert (cyc["x"], cyc["y"]) == ("a", "b")


def test_message_lookup_is_materialized(client: TestClient) -> None:
    """``/messagedefinition?uri=`` (Message Catalog 4.4.3) returns the definition complete."""
    client.put(
        "/messagegroups/g/messages/base",
        json={"envelope": "CloudEvents/1.0", "envelopemetadata": {"subject": {"required": True}}},
    )
    client.put(
        "/messagegroups/g/messages/child",
        json={
            "envelope": "CloudEvents/1.0",
            "basemessage": "/messagegroups/g/messages/base",
            "envelopemetadata": {"type": {"value": "child"}},
        },
    )
    got = client.get("/messagedefinition", params={"uri": "/messagegroups/g/messages/child"}).json()
    assert got["envelopemetadata"] == {"subject": {"required": True}, "type": {"value": "child"}}
    assert got["messageid"] == "child"
    plain = client.get("/messagegroups/g/messages/child").json()
    assert plain["envelopemetadata"] == {"type": {"value": "child"}}  # GET shows what was stored


def test_base_messages_used_for_validation(client: TestClient, component: Any) -> None:
    """A message extending a base is checked against the merged definition."""
    client.put(
        "/messagegroups/g/messages/base",
        json={"envelope": "CloudEvents/1.0", "envelopemetadata": {"subject": {"required": True}}},
    )
    client.put(
        "/messagegroups/g/messages/com.example.child",
        json={
            "envelope": "CloudEvents/1.0",
            "basemessage": "/messagegroups/g/messages/base",
            "envelopemetadata": {"source": {"value": "/child"}},
        },
    )
    event = {"specversion": "1.0", "id": "1", "type": "com.example.child", "source": "/other"}
    found = {v.pointer for v in component.validator.validate(event)}
    assert found == {"/subject", "/source"}
    assert component.validator.validate({**event, "source": "/child", "subject": "s"}) == []


@pytest.mark.parametrize(
    ("template", "value", "ok"),
    [
        ("/erp/{tenant}/orders", "/erp/acme/orders", True),
        ("/erp/{tenant}/orders", "/erp/orders", False),
        ("{a}/{b}", "x/y", True),
        ("{a}/{a}", "x/x", True),
        ("{a}/{a}", "x/y", False),
        ("a.b*c", "a.bxc", False),  # no placeholders: literal, regex characters escaped
    ],
)
def test_uri_template_placeholders_are_wildcards(template: str, value: str, ok: bool) -> None:
    """Placeholders match anything; one name binds one value."""
    assert (template_regex(template).match(value) is not None) is ok


def _definition(metadata: dict[str, Any], schema: Any = None) -> Definition:
    templates = {
        k: template_regex(v["value"])
        for k, v in metadata.items()
        if v.get("type") == "uritemplate" and "value" in v
    }
    return Definition("/messagegroups/g/messages/t", metadata, schema, templates)


def test_required_fixed_values_and_types() -> None:
    """Required attributes (type/id/source always), fixed values, CloudEvents types."""
    d = _definition(
        {
            "type": {"value": "t"},
            "subject": {"required": True, "type": "uritemplate", "value": "{tenant}/x"},
            "source": {"type": "uritemplate", "value": "/{tenant}"},
            "count": {"type": "integer"},
            "when": {"type": "timestamp", "value": "0000-01-01T00:00:00Z"},
            "flag": {"type": "boolean"},
            "link": {"type": "uri"},
        }
    )
    good = {
        "type": "t",
        "id": "1",
        "source": "/acme",
        "subject": "acme/x",
        "count": 3,
        "when": "2026-01-01T00:00:00Z",
        "flag": True,
        "link": "https://example.com",
    }
    assert d.check(good) == []
    bad = {
        "type": "t",
        "source": "/acme",
        "subject": "other/x",
        "count": "three",
        "when": "yesterday",
        "link": "x",
    }
    assert {v.pointer for v in d.check(bad)} == {"/id", "/subject", "/count", "/when", "/link"}


def test_data_against_inline_schema() -> None:
    """``data`` is validated against the definition's JSON Schema, each error with its pointer."""
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n"],
    }
    d = _definition({}, schema)
    base = {"type": "t", "id": "1", "source": "/s"}
    assert d.check({**base, "data": {"n": 1}}) == []
    assert [v.pointer for v in d.check({**base, "data": {"n": "x", "s": 2}})] == ["/data/n", "/data/s"]
    assert [v.pointer for v in d.check({**base, "data": {}})] == ["/data"]


def test_definition_found_by_type_value(client: TestClient, component: Any) -> None:
    """An event matches by messageid, else by the ``type`` value in envelopemetadata."""
    client.put(
        "/messagegroups/g/messages/some-id",
        json={
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.x"}, "subject": {"required": True}},
        },
    )
    event = {"specversion": "1.0", "id": "1", "type": "com.example.x", "source": "/s"}
    assert [v.pointer for v in component.validator.validate(event)] == ["/subject"]
    assert component.validator.validate({**event, "type": "com.example.none"}) == []


def test_dataschemauri_forms(client: TestClient, component: Any) -> None:
    """dataschemauri resolves as an xid, a document-view ``#/`` reference or this registry's URL,
    with a ``#/pointer`` fragment selecting a sub-schema (1.0-rc2 ``dataschemauri``)."""
    defs = {"definitions": {"order": {"type": "object", "required": ["id"]}}}
    client.put("/schemagroups/s/schemas/defs$details", json={"format": "JsonSchema/draft-07", "schema": defs})
    forms = {
        "a": "/schemagroups/s/schemas/defs#/definitions/order",
        "b": "#/schemagroups/s/schemas/defs#/definitions/order",
        "c": "http://testserver/schemagroups/s/schemas/defs/versions/1#/definitions/order",
    }
    for mid, uri in forms.items():
        r = client.put(
            f"/messagegroups/g/messages/{mid}",
            json={"dataschemaformat": "JsonSchema/draft-07", "dataschemauri": uri},
        )
        assert r.status_code == 201, r.text
        event = {"specversion": "1.0", "id": "1", "type": mid, "source": "/s"}
        assert [v.pointer for v in component.validator.validate({**event, "data": {}})] == ["/data"], uri
        assert component.validator.validate({**event, "data": {"id": 1}}) == []


def test_index_reuses_unchanged_definitions(client: TestClient, component: Any) -> None:
    """After a write, definitions it did not change keep their compiled schemas."""
    schema = {"type": "object"}
    for mid in ("a", "b"):
        client.put(
            f"/messagegroups/g/messages/{mid}",
            json={"dataschemaformat": "JsonSchema/draft-07", "dataschema": schema},
        )
    before = {k: v[0] for k, v in component.validator.index.by_type.items()}
    client.patch("/messagegroups/g/messages/b", json={"dataschema": {"type": "array"}})
    after = {k: v[0] for k, v in component.validator.index.by_type.items()}
    assert after["a"] is before["a"]
    assert after["b"] is not before["b"]
    assert after["b"].schema == {"type": "array"}
