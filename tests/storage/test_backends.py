"""The registry of storage backends: a path or a ``sqlite:`` URL is the SQLite backend, a
``postgresql://`` or ``postgres://`` URL the PostgreSQL one (named without its password), an
unknown URL scheme is refused naming the known ones, and every backend is a ``Storage``."""

from __future__ import annotations

from pathlib import Path

import pytest

from cebroker.storage import BACKENDS, Storage, create_storage
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.sqlite import SqliteStorage
from storage.support import BACKEND_PARAMS, STORAGES


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_every_backend_is_a_storage(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> None:
    assert isinstance(STORAGES[backend](request, tmp_path), Storage)


def test_a_path_or_a_sqlite_url_is_sqlite(tmp_path: Path) -> None:
    cases: list[tuple[str | Path, Path]] = [
        (tmp_path / "a.db", tmp_path / "a.db"),
        (str(tmp_path / "b.db"), tmp_path / "b.db"),
        (f"sqlite://{tmp_path}/c.db", tmp_path / "c.db"),
        ("sqlite:relative.db", Path("relative.db")),
        ("weird:name.db", Path("weird:name.db")),  # no such scheme, and not a URL: a file name
    ]
    for target, expected in cases:
        storage = create_storage(target)
        assert isinstance(storage, SqliteStorage)
        assert storage.path == expected
        assert storage.name == str(expected)


@pytest.mark.parametrize("target", ["mysql://h/d", "redis://h:6379/0"])
def test_an_unknown_url_scheme_is_refused(target: str) -> None:
    assert target.split(":")[0] not in BACKENDS
    with pytest.raises(ValueError, match="no storage backend") as info:
        create_storage(target)
    assert "sqlite" in str(info.value)


def test_a_sqlite_url_names_a_file() -> None:
    with pytest.raises(ValueError, match="names a file"):
        create_storage("sqlite://")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_a_postgres_url_is_postgres_and_its_password_is_never_shown(scheme: str) -> None:
    storage = create_storage(f"{scheme}://broker:s3cr%40t@db.example:5433/cebroker?sslmode=require")
    assert isinstance(storage, PostgresStorage)
    assert "s3cr" not in storage.name
    assert storage.name == f"{scheme.lower()}://broker:***@db.example:5433/cebroker?sslmode=require"
    assert "s3cr" not in storage.health.name
