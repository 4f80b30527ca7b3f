"""Brokers on either storage backend, for the pipeline tests that involve the log.

Import :func:`backend` and :func:`start_broker` into a test module (fixtures are found by name):
every test that takes ``start_broker`` then runs twice, on SQLite (a file in ``tmp_path``) and on
PostgreSQL (the test's own database, ``migrated_postgres_url``: the schema is in it already). Two
brokers started in one test share the database: on SQLite one after the other (a restart), on
PostgreSQL also at once (instances).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.broker import Broker

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend of the brokers of this test."""
    return str(request.param)


@pytest.fixture
def database(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str | Path:
    """The database every broker of this test uses."""
    if backend == "postgres":
        return str(request.getfixturevalue("migrated_postgres_url"))
    return tmp_path / "broker.db"


@pytest.fixture
def start_broker(make_broker: Callable[..., Broker], database: str | Path) -> Callable[..., Broker]:
    """``start_broker(**settings)``: a broker (see ``make_broker``) on this test's database."""

    def start(**settings: Any) -> Broker:
        return make_broker(db=database, **settings)

    return start
