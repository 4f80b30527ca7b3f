"""The broker's OpenAPI document covers every route the app serves, with every method, and no
response schema carries a write-only credential field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route

from cebroker.app import admission_rules, create_app, openapi_document
from cebroker.settings import Settings

#: Write-only fields of sink credentials: accepted in requests, never in any answer.
SECRETS = {"secret", "accesstoken", "refreshtoken"}


@pytest.fixture
def app_and_doc(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    app = create_app(Settings(db=tmp_path / "doc.db"))
    return app, openapi_document(app.state.components, admission_rules())


def _template(path: str) -> str:
    """A Starlette path as an OpenAPI one: ``{id}`` stays, converters go (``{rest:path}``)."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


async def test_every_route_and_method_is_described(app_and_doc: tuple[Any, dict[str, Any]]) -> None:
    """Each route is in the document with each method it supports; a method a route takes but
    always refuses (the registry's routes take every method and answer 405 for most) must
    really answer 405 naming the methods that work."""
    app, doc = app_and_doc
    described = doc["paths"]
    missing = []
    refused: list[tuple[str, str]] = []
    for route in app.routes:
        if isinstance(route, Mount):
            if not any(path.startswith(route.path + "/") for path in described):
                missing.append(route.path)
            continue
        assert isinstance(route, Route)
        path = _template(route.path)
        if path.endswith("{rest}"):  # the registry's tree below a group collection
            prefix = path.removesuffix("{rest}")
            if not any(p.startswith(prefix) and p != prefix for p in described):
                missing.append(path)
            continue
        if path not in described:
            missing.append(path)
            continue
        methods = {m.lower() for m in (route.methods or set())} - {"head"}
        if route.methods is None:  # a MethodRouter: its own methods are described
            continue
        refused += [(method, path) for method in sorted(methods - set(described[path]))]
    assert missing == []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://broker.test") as client,
    ):
        for method, path in refused:
            answer = await client.request(method.upper(), path, json={})
            assert answer.status_code == 405, (method, path, answer.status_code)
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert method.upper() not in answer.headers["allow"]


def _walk(schema: Any, schemas: dict[str, Any], seen: set[str]) -> set[str]:
    """Every property name reachable from ``schema``."""
    names: set[str] = set()
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            seen.add(ref)
            names |= _walk(schemas[ref.rsplit("/", 1)[-1]], schemas, seen)
        if isinstance(schema.get("properties"), dict):
            names |= set(schema["properties"])
        for value in schema.values():
            names |= _walk(value, schemas, seen)
    elif isinstance(schema, list):
        for item in schema:
            names |= _walk(item, schemas, seen)
    return names


def test_no_response_schema_has_a_write_only_field(app_and_doc: tuple[Any, dict[str, Any]]) -> None:
    _, doc = app_and_doc
    schemas = doc["components"]["schemas"]
    leaks = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                found = _walk(response.get("content", {}), schemas, set()) & SECRETS
                if found:
                    leaks.append(f"{method.upper()} {path} {status}: {sorted(found)}")
    assert leaks == []
    # ...while the request schemas do take them (the check above can see them)
    assert _walk(schemas["SubscriptionRequest"], schemas, set()) >= SECRETS
