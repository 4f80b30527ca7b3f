"""Fuzz the whole broker in process from its own OpenAPI document (schemathesis over ASGI): the
Subscriptions API, ``/events`` in its three content modes, delivery status, dead letters and
redrive, explain, the live tail, broker status, metrics, health, the registry and the console.

Every generated request, valid or not, must get no 5xx, a status and headers the document
declares, a body matching the declared schema, a 4xx for a request the schema forbids, and
problem+json for every 4xx.
"""

from __future__ import annotations

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
from cebroker.settings import Settings

if TYPE_CHECKING:
    # A case of an OpenAPI operation (the alias exists for type checkers only).
    from schemathesis.specs.openapi.schemas import OpenApiCase

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


# The app is built at import and the schema (and so the parametrization) is read from its document
# without starting it (from_asgi would start it, and leave it running until exit): schemathesis
# starts its lifespan in each test and stops it at the test's teardown. The schema is bound to the
# app as from_asgi binds it. Its database lives in a directory removed when the module's tests are
# done.
_DB_DIR = Path(tempfile.mkdtemp(prefix="cebroker-fuzz-"))
_APP = create_app(Settings(db=_DB_DIR / "fuzz.db"))
schema = schemathesis.openapi.from_dict(openapi_document(_APP.state.components, admission_rules()))
schema.app = _APP


@pytest.fixture(scope="module", autouse=True)
def _remove_db_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_DB_DIR, ignore_errors=True)


@schema.parametrize()
@hypothesis.settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
)
def test_api_conforms_to_its_document(case: OpenApiCase) -> None:
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"][0].startswith("application/problem+json")
        if case.method != "HEAD":  # HEAD answers carry no body
            assert response.json()["status"] == response.status_code
