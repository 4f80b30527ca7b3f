"""The OpenAPI document at /openapi.json describes the real behaviour: every real response of
every operation (success and problem) validates against the schema the document declares for
its status, and the declared headers are present."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from api.bodies import VALID, create, http_sub

DOC_URI = "urn:cebroker:openapi"


@pytest.fixture
async def doc(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body: dict[str, Any] = r.json()
    return body


def _validator(doc: dict[str, Any], pointer: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(
        DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    return Draft202012Validator({"$ref": f"{DOC_URI}#{pointer}"}, registry=registry)


def check(doc: dict[str, Any], path: str, method: str, response: httpx.Response) -> None:
    """``response`` has a status the document declares for the operation, its declared headers,
    and a body valid against the declared schema of its content type."""
    declared = doc["paths"][path][method]["responses"]
    status = str(response.status_code)
    assert status in declared, f"{method.upper()} {path} answered undeclared {status}"
    spec = declared[status]
    for header in spec.get("headers", {}):
        if header != "Link":  # only present when another page follows
            assert header.lower() in response.headers, f"{header} missing on {method.upper()} {path} {status}"
    content = spec.get("content")
    if content is None or method == "head":
        return
    media = response.headers["content-type"].split(";")[0]
    assert media in content
    escaped = path.replace("~", "~0").replace("/", "~1")
    pointer = f"/paths/{escaped}/{method}/responses/{status}/content/{media.replace('/', '~1')}/schema"
    errors = list(_validator(doc, pointer).iter_errors(response.json()))
    assert not errors, [e.message for e in errors]


async def test_document_is_openapi_31_with_valid_schemas(doc: dict[str, Any]) -> None:
    assert doc["openapi"] == "3.1.0"
    assert set(doc["paths"]) >= {"/subscriptions", "/subscriptions/{id}", "/openapi.json"}
    ids = [
        op["operationId"]
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    ]
    assert len(ids) == len(set(ids))
    for name, schema in doc["components"]["schemas"].items():
        assert name
        Draft202012Validator.check_schema(schema)


async def test_registered_settings_are_documented(doc: dict[str, Any]) -> None:
    """Settings other parts declare (HTTP ``contentmode`` from the pipeline) appear in the schema."""
    from cebroker.api.openapi_schemas import SETTINGS_SCHEMAS
    from cebroker.app import admission_rules

    protocols = admission_rules().protocols
    assert set(SETTINGS_SCHEMAS) == set(protocols)
    assert "contentmode" in protocols["HTTP"].settings
    for protocol, rules in protocols.items():
        documented = set(doc["components"]["schemas"][SETTINGS_SCHEMAS[protocol]]["properties"])
        assert set(rules.settings) == documented, protocol


async def test_real_responses_match_the_document(client: httpx.AsyncClient, doc: dict[str, Any]) -> None:
    full = http_sub(
        source="/s",
        types=["t"],
        config={"k": "v"},
        filters=[{"all": [{"exact": {"type": "t"}}, {"not": {"suffix": {"subject": ".tmp"}}}]}],
        protocolsettings={"headers": {"x-a": "b"}, "method": "PUT"},
        sinkcredential={"credentialtype": "PLAIN", "identifier": "u", "secret": "p"},
    )
    r = await client.post("/subscriptions", json=full)
    check(doc, "/subscriptions", "post", r)
    sid = r.json()["id"]
    for body in VALID.values():
        check(doc, "/subscriptions", "post", await client.post("/subscriptions", json=body))
    check(doc, "/subscriptions", "post", await client.post("/subscriptions", json={"protocol": "x"}))
    check(
        doc,
        "/subscriptions",
        "post",
        await client.post("/subscriptions", content=b"{}", headers={"content-type": "text/plain"}),
    )
    check(
        doc,
        "/subscriptions",
        "post",
        await client.post("/subscriptions", json=http_sub(config={"p": "x" * 5000})),
    )

    page = await client.get("/subscriptions?limit=2")
    assert "link" in page.headers
    check(doc, "/subscriptions", "get", page)
    check(doc, "/subscriptions", "get", await client.get("/subscriptions?type=t&protocol=HTTP"))
    check(doc, "/subscriptions", "get", await client.get("/subscriptions?limit=0"))
    check(doc, "/subscriptions", "head", await client.head("/subscriptions"))
    check(doc, "/subscriptions", "options", await client.options("/subscriptions"))

    item = "/subscriptions/{id}"
    check(doc, item, "get", await client.get(f"/subscriptions/{sid}"))
    check(doc, item, "get", await client.get("/subscriptions/none"))
    check(doc, item, "head", await client.head(f"/subscriptions/{sid}"))
    check(doc, item, "options", await client.options(f"/subscriptions/{sid}"))
    check(doc, item, "put", await client.put(f"/subscriptions/{sid}", json=full))
    check(
        doc, item, "put", await client.put(f"/subscriptions/{sid}", json=full, headers={"If-Match": '"old"'})
    )
    check(doc, item, "put", await client.put(f"/subscriptions/{sid}", json={"sink": 1}))
    check(doc, item, "put", await client.put("/subscriptions/none", json=full))
    check(doc, item, "delete", await client.delete(f"/subscriptions/{sid}", headers={"If-Match": "bad"}))
    check(doc, item, "delete", await client.delete(f"/subscriptions/{sid}"))
    check(doc, item, "delete", await client.delete(f"/subscriptions/{sid}"))
    check(doc, "/openapi.json", "get", await client.get("/openapi.json"))


async def test_subscription_schema_rejects_what_the_api_never_returns(
    client: httpx.AsyncClient, doc: dict[str, Any]
) -> None:
    """The response schema is strict enough to catch a leaked secret or a missing default."""
    sub = await create(
        client, http_sub(sinkcredential={"credentialtype": "PLAIN", "identifier": "u", "secret": "p"})
    )
    validator = _validator(doc, "/components/schemas/Subscription")
    assert validator.is_valid(sub)
    leaked = {**sub, "sinkcredential": {**sub["sinkcredential"], "secret": "p"}}
    assert not validator.is_valid(leaked)
    assert not validator.is_valid({k: v for k, v in sub.items() if k != "protocolsettings"})
    assert not validator.is_valid({**sub, "protocolsettings": {"method": "POST", "qos": 1}})
