"""Schemathesis over the whole API an authenticated broker serves, with a valid key (every scope
of one tenant): no 5xx, every answer as documented (status, headers, content type and body
schema; problem+json for every 4xx); and the same requests without the key: 401 with a Bearer
challenge, except on the public routes."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cebroker.app import admission_rules, create_app, openapi_document

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase
from cebroker.auth.scopes import PUBLIC, required_scope
from cebroker.principal import ADMIN, SCOPES
from cebroker.settings import Settings

KEY = "cbk_fuzz-" + "k" * 24
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

# Built at import: the schema (and so the parametrization) is read from the app's document without
# starting the app (schemathesis starts and stops its lifespan around each test), then bound to it.
_DIR = Path(tempfile.mkdtemp(prefix="cebroker-fuzz-auth-"))
(_DIR / "keys.json").write_text(
    json.dumps(
        {
            "keys": [
                {
                    "id": "fuzz",
                    "sha256": hashlib.sha256(KEY.encode()).hexdigest(),
                    "tenant": "fuzz",
                    "scopes": [scope for scope in SCOPES if scope != ADMIN],
                }
            ]
        }
    )
)
_APP = create_app(Settings(db=_DIR / "fuzz.db", api_keys=_DIR / "keys.json"))
schema = schemathesis.openapi.from_dict(openapi_document(_APP.state.components, admission_rules()))
schema.app = _APP


@pytest.fixture(scope="module", autouse=True)
def _remove_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_DIR, ignore_errors=True)


@schema.parametrize()
@hypothesis.settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
)
def test_with_a_valid_key(case: OpenApiCase) -> None:
    response = case.call(headers={"authorization": f"Bearer {KEY}"})
    case.validate_response(response, checks=CHECKS)
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"][0].startswith("application/problem+json")
        if case.method != "HEAD":  # HEAD answers carry no body
            assert response.json()["status"] == response.status_code
    needed = required_scope(case.method.upper(), case.formatted_path)
    assert response.status_code != 401, response.text
    assert response.status_code != 403 or needed == ADMIN, response.text  # the key is not an admin
    anonymous = case.call(headers={"authorization": ""})
    if needed == PUBLIC:
        return
    assert anonymous.status_code == 401, anonymous.text
    assert anonymous.headers["www-authenticate"][0].startswith("Bearer")
