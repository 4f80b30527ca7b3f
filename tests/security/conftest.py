"""Fixtures of the access-control tests: a local OIDC issuer and API keys for two tenants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cebroker.principal import ADMIN, SCOPES
from security.support import Issuer, served_issuer, write_api_keys

#: Every scope but admin.
TENANT_SCOPES = [scope for scope in SCOPES if scope != ADMIN]


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with served_issuer() as running:
        yield running


@pytest.fixture
def api_keys(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Keys: ``admin``; ``acme`` and ``globex`` with every other scope; ``acme-no-<scope>`` with
    every other scope but that one."""
    entries = [
        {"id": "admin", "scopes": [ADMIN]},
        {"id": "acme", "tenant": "acme", "scopes": TENANT_SCOPES},
        {"id": "globex", "tenant": "globex", "scopes": TENANT_SCOPES},
        *(
            {"id": f"acme-no-{scope}", "tenant": "acme", "scopes": [s for s in TENANT_SCOPES if s != scope]}
            for scope in TENANT_SCOPES
        ),
    ]
    path = tmp_path / "keys.json"
    return path, write_api_keys(path, entries)
