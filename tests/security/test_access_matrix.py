"""The authorization matrix: every route x every kind of caller -> the expected status, and the
stored state unchanged after every refusal.

Callers: no credentials, an unknown key, an expired token, a token for another audience, a key
without the route's scope, a key of another tenant, and allowed callers (a key and an OIDC
token). Tokens are RS256/ES256 JWTs signed in the test and verified against the local issuer's
JWKS; the broker runs in process with API keys and OIDC both configured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cebroker.app import create_app
from cebroker.principal import (
    DEADLETTERS_MANAGE,
    EVENTS_PUBLISH,
    METRICS_READ,
    REGISTRY_READ,
    REGISTRY_WRITE,
    SUBSCRIPTIONS_READ,
    SUBSCRIPTIONS_WRITE,
)
from cebroker.settings import Settings
from security.conftest import TENANT_SCOPES
from security.support import AUDIENCE, Issuer

SUB = {"protocol": "HTTP", "sink": "https://sink.example/hook"}
EVENT = {"specversion": "1.0", "id": "m-1", "source": "/matrix", "type": "t"}


@dataclass(frozen=True)
class Call:
    """One route: how to call it, the scope it needs, whether it is a tenant's subscription."""

    name: str
    method: str
    path: str  # {id}: a subscription of tenant acme made for this call
    scope: str | None  # None: any principal
    scoped: bool
    allowed: int
    body: Any = None
    headers: dict[str, str] | None = None


CALLS = [
    Call("list", "GET", "/subscriptions", SUBSCRIPTIONS_READ, False, 200),
    Call("create", "POST", "/subscriptions", SUBSCRIPTIONS_WRITE, False, 201, SUB),
    Call("retrieve", "GET", "/subscriptions/{id}", SUBSCRIPTIONS_READ, True, 200),
    Call("head", "HEAD", "/subscriptions/{id}", SUBSCRIPTIONS_READ, True, 200),
    Call("options", "OPTIONS", "/subscriptions/{id}", SUBSCRIPTIONS_READ, False, 200),
    Call("replace", "PUT", "/subscriptions/{id}", SUBSCRIPTIONS_WRITE, True, 200, {**SUB, "types": ["x"]}),
    Call("delete", "DELETE", "/subscriptions/{id}", SUBSCRIPTIONS_WRITE, True, 200),
    Call("status", "GET", "/subscriptions/{id}/status", SUBSCRIPTIONS_READ, True, 200),
    Call("deadletters", "GET", "/subscriptions/{id}/deadletters", DEADLETTERS_MANAGE, True, 200),
    Call("redrive", "POST", "/subscriptions/{id}/deadletters/redrive", DEADLETTERS_MANAGE, True, 202),
    Call(
        "publish",
        "POST",
        "/events",
        EVENTS_PUBLISH,
        False,
        202,
        EVENT,
        {"content-type": "application/cloudevents+json"},
    ),
    Call("metrics", "GET", "/metrics", METRICS_READ, False, 200),
    Call("registry", "GET", "/", REGISTRY_READ, False, 200),
    Call("export", "GET", "/export", REGISTRY_READ, False, 200),
    Call("registry write", "PUT", "/messagegroups/orders", REGISTRY_WRITE, False, 201, {"description": "x"}),
    Call("openapi", "GET", "/openapi.json", None, False, 200),
]

Caller = Callable[[Call], Awaitable[dict[str, str]]]


@pytest.fixture
async def broker(
    tmp_path: Path, issuer: Issuer, api_keys: tuple[Path, dict[str, str]]
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    path, keys = api_keys
    settings = Settings(
        db=tmp_path / "matrix.db",
        api_keys=path,
        oidc_issuer=issuer.url,
        oidc_audience=AUDIENCE,
        # Stopped at once: the deliveries to the unreachable sink the calls create are not what
        # this tests, and the default grace waited 10 s for them at every teardown.
        shutdown_grace=0.0,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker.test") as client:
            yield client, keys


def bearer(value: str) -> dict[str, str]:
    return {"authorization": f"Bearer {value}"}


async def state(client: httpx.AsyncClient, admin: dict[str, str]) -> tuple[Any, ...]:
    """Everything a refused call could have changed, as an admin sees it."""
    subs = await client.get("/subscriptions", headers=admin)
    registry = await client.get("/export", headers=admin)
    backlog = [
        line
        for line in (await client.get("/metrics", headers=admin)).text.splitlines()
        if "events" in line and "_total " in line
    ]
    statuses = [
        (await client.get(f"/subscriptions/{s['id']}/status", headers=admin)).json() for s in subs.json()
    ]
    return subs.json(), registry.json(), backlog, statuses


async def run(client: httpx.AsyncClient, call: Call, headers: dict[str, str], target: str) -> httpx.Response:
    merged = {**(call.headers or {}), **headers}
    kwargs: dict[str, Any] = {"headers": merged}
    if call.body is not None:
        if call.headers:
            import json

            kwargs["content"] = json.dumps(call.body)
        else:
            kwargs["json"] = call.body
    return await client.request(call.method, call.path.format(id=target), **kwargs)


CALLERS = [
    "none",
    "unknown key",
    "expired token",
    "wrong audience",
    "missing scope",
    "other tenant",
    "key",
    "token",
]


@pytest.mark.parametrize("caller", CALLERS)
async def test_every_route(
    caller: str, broker: tuple[httpx.AsyncClient, dict[str, str]], issuer: Issuer
) -> None:
    client, keys = broker
    admin = bearer(keys["admin"])
    failures: list[str] = []
    for call in CALLS:
        created = await client.post("/subscriptions", json=SUB, headers=bearer(keys["acme"]))
        assert created.status_code == 201, created.text
        target = created.json()["id"]
        expected, headers = expectation(caller, call, keys, issuer)
        before = await state(client, admin)
        response = await run(client, call, headers, target)
        problem = f"{call.name} as {caller}: {response.status_code} {response.text[:200]}"
        if response.status_code != expected:
            failures.append(f"expected {expected}; {problem}")
            continue
        if expected == 401 and not response.headers.get("www-authenticate", "").startswith("Bearer"):
            failures.append(f"no Bearer challenge; {problem}")
        named = call.method == "HEAD" or (call.scope or "") in response.text
        if expected == 403 and not named:
            failures.append(f"the scope is not named; {problem}")
        if expected in (401, 403, 404) and await state(client, admin) != before:
            failures.append(f"refused, yet the stored state changed; {problem}")
        listed = call.name == "list" and expected == 200 and target in [s["id"] for s in response.json()]
        if caller == "other tenant" and listed:
            failures.append(f"another tenant's subscription is listed; {problem}")
    assert not failures, "\n".join(failures)


def expectation(caller: str, call: Call, keys: dict[str, str], issuer: Issuer) -> tuple[int, dict[str, str]]:
    """The status ``caller`` must get on ``call``, and the headers it sends."""
    if caller == "none":
        return 401, {}
    if caller == "unknown key":
        return 401, bearer("cbk_not-a-key")
    if caller == "expired token":
        return 401, bearer(issuer.token(scopes=TENANT_SCOPES, expires_in=-600))
    if caller == "wrong audience":
        return 401, bearer(issuer.token(scopes=TENANT_SCOPES, audience="someone-else"))
    if caller == "missing scope":
        if call.scope is None:
            return call.allowed, bearer(keys[f"acme-no-{SUBSCRIPTIONS_READ}"])
        return 403, bearer(keys[f"acme-no-{call.scope}"])
    if caller == "other tenant":
        return (404 if call.scoped else call.allowed), bearer(keys["globex"])
    if caller == "key":
        return call.allowed, bearer(keys["acme"])
    # An ES256 token with the scopes as an ``scp`` array.
    return call.allowed, bearer(issuer.token(scopes=TENANT_SCOPES, kid="ec-1", claim="scp"))


async def test_public_routes_need_no_credentials(broker: tuple[httpx.AsyncClient, dict[str, str]]) -> None:
    client, _ = broker
    for path in ("/healthz", "/readyz"):
        assert (await client.get(path)).status_code == 200
    assert (await client.get("/metrics")).status_code == 401
