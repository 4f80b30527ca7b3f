"""Fixtures for the in-process API tests: the real app (SQLite in tmp_path) over httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from cebroker.app import create_app
from cebroker.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db=tmp_path / "api.db", max_subscription_body=4096)


@pytest.fixture
def app(settings: Settings) -> Starlette:
    return create_app(settings)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the whole broker app, started through its lifespan (store open, parts started)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker.test") as c:
            yield c
