"""``sinkcredential`` field spellings (Subscriptions API 3.2.3): ``identifier`` / ``identity`` and
``refreshtokenendpoint`` / ``refreshtokenurl`` are both accepted, and the realized subscription
(3.2.5 Create, Retrieve, Query, Update) returns the spelling the client sent, secrets left out."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from api.bodies import create, http_sub

SECRETS = ("secret", "accesstoken", "refreshtoken")

_REFRESH = {
    "credentialtype": "REFRESHTOKEN",
    "accesstoken": "AT-SECRET",
    "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
    "accesstokentype": "bearer",
    "refreshtoken": "RT-SECRET",
}

#: One credential per spelling of each aliased field.
SPELLINGS = {
    "identifier": {"credentialtype": "PLAIN", "identifier": "svc", "secret": "PW-SECRET"},
    "identity": {"credentialtype": "PLAIN", "identity": "svc", "secret": "PW-SECRET"},
    "refreshtokenendpoint": {**_REFRESH, "refreshtokenendpoint": "https://auth.example/token"},
    "refreshtokenurl": {**_REFRESH, "refreshtokenurl": "https://auth.example/token"},
}
#: Each spelling and the other one of the same field.
OTHER = {
    "identifier": "identity",
    "identity": "identifier",
    "refreshtokenendpoint": "refreshtokenurl",
    "refreshtokenurl": "refreshtokenendpoint",
}


def _without_secrets(credential: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in credential.items() if k not in SECRETS}


@pytest.mark.parametrize("field", list(SPELLINGS))
async def test_each_spelling_is_returned_as_sent(client: httpx.AsyncClient, field: str) -> None:
    """3.2.3 + 3.2.5: create, retrieve and query answer the credential under the name sent."""
    sent = SPELLINGS[field]
    expected = _without_secrets(sent)
    created = await create(client, http_sub(sinkcredential=sent))
    assert created["sinkcredential"] == expected
    assert OTHER[field] not in created["sinkcredential"]
    got = await client.get(f"/subscriptions/{created['id']}")
    assert got.status_code == 200
    assert got.json()["sinkcredential"] == expected
    listed = await client.get("/subscriptions")
    (item,) = [s for s in listed.json() if s["id"] == created["id"]]
    assert item["sinkcredential"] == expected
    for answer in (got, listed):
        assert "SECRET" not in answer.text


@pytest.mark.parametrize("field", list(SPELLINGS))
async def test_replace_switches_to_the_new_spelling(client: httpx.AsyncClient, field: str) -> None:
    """3.2.5 Update: the replacement's spelling replaces the old one (no field under both names)."""
    created = await create(client, http_sub(sinkcredential=SPELLINGS[field]))
    other = SPELLINGS[OTHER[field]]
    r = await client.put(f"/subscriptions/{created['id']}", json=http_sub(sinkcredential=other))
    assert r.status_code == 200, r.text
    assert r.json()["sinkcredential"] == _without_secrets(other)
    got = await client.get(f"/subscriptions/{created['id']}")
    assert got.json()["sinkcredential"] == _without_secrets(other)


@pytest.mark.parametrize("alias", ["identity", "refreshtokenurl"])
async def test_both_spellings_at_once_are_refused(client: httpx.AsyncClient, alias: str) -> None:
    """One field, two names: 400 naming the alias, whichever order they come in."""
    canonical = OTHER[alias]
    base = SPELLINGS[canonical]
    body = http_sub(sinkcredential={alias: base[canonical], **base})
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"
    pointers = [e["pointer"] for e in r.json()["errors"]]
    assert pointers == [f"/sinkcredential/{alias}"]


async def test_missing_field_is_named_by_its_spec_name(client: httpx.AsyncClient) -> None:
    """Neither spelling given: the error names the spec's field (``identifier``)."""
    r = await client.post(
        "/subscriptions", json=http_sub(sinkcredential={"credentialtype": "PLAIN", "secret": "s"})
    )
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert [e["pointer"] for e in errors] == ["/sinkcredential/identifier"]
    assert "required" in errors[0]["detail"]


async def test_alias_with_wrong_type_is_named_as_sent(client: httpx.AsyncClient) -> None:
    """A bad value under an alias is reported at the alias's pointer (the client's own name)."""
    cred = {**_REFRESH, "refreshtokenurl": "ftp://auth.example/token"}
    r = await client.post("/subscriptions", json=http_sub(sinkcredential=cred))
    assert r.status_code == 400
    assert [e["pointer"] for e in r.json()["errors"]] == ["/sinkcredential/refreshtokenurl"]


@pytest.mark.parametrize("field", list(SPELLINGS))
async def test_openapi_document_describes_each_spelling(client: httpx.AsyncClient, field: str) -> None:
    """The OpenAPI response schema accepts either spelling, and still rejects a leaked secret."""
    doc = (await client.get("/openapi.json")).json()
    uri = "urn:cebroker:openapi"
    registry: Registry[Any] = Registry().with_resource(
        uri, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    response = Draft202012Validator({"$ref": f"{uri}#/components/schemas/Subscription"}, registry=registry)
    request = Draft202012Validator({"$ref": f"{uri}#/components/schemas/SinkCredential"}, registry=registry)
    assert request.is_valid(SPELLINGS[field])
    sub = await create(client, http_sub(sinkcredential=SPELLINGS[field]))
    assert response.is_valid(sub)
    leaked = {**sub, "sinkcredential": {**sub["sinkcredential"], "refreshtoken": "x", "secret": "x"}}
    assert not response.is_valid(leaked)
