"""Fixtures of the storage suites: an open storage of every backend in ``tmp_path``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cebroker.storage import Storage
from storage.support import BACKEND_PARAMS, STORAGES


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return str(request.param)


@pytest.fixture
async def storage(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> AsyncIterator[Storage]:
    """An open storage of ``backend``; closed after the test."""
    opened = STORAGES[backend](request, tmp_path)
    await opened.open()
    yield opened
    await opened.close()
