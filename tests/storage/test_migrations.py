"""The one migration runner (``storage/migrations.py``) and the schema files it reads.

Steps are SQL files shipped with each backend, numbered without gaps; each step runs in a
transaction of its own (a step that fails leaves the earlier ones applied and recorded, and
nothing of itself); SQLite runs a file statement by statement as its own tokenizer delimits
them, never by splitting on ``;``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cebroker.storage import migrations
from cebroker.storage.errors import SchemaTooNew
from cebroker.storage.migrations import COMPONENTS, Step
from cebroker.storage.postgres import migrations as postgres
from cebroker.storage.sqlite import migrations as sqlite


def step(component: str, version: int, text: str) -> Step:
    return Step(component, version, f"{version:04d}_test.sql", text.encode())


def test_each_backend_ships_every_component_numbered_without_gaps() -> None:
    for backend in (sqlite, postgres):
        assert tuple(backend.STEPS) == COMPONENTS
        for component, steps in backend.STEPS.items():
            assert [s.version for s in steps] == list(range(1, len(steps) + 1))
            assert all(s.component == component and s.text.strip() for s in steps)
    # PostgreSQL's steps 6 to 9 only replace or add server functions (the append's plans for
    # small groups; claims only for a registered instance; the append without groups' parts and
    # the announcements' probe; the append of distinct keys); step 10 counts freed claims apart;
    # step 11 claims subscriptions together
    assert sqlite.latest()["deliveries"] == 5
    assert postgres.latest()["deliveries"] == 11


def test_sqlite_statements_end_where_sqlite_says_not_at_every_semicolon() -> None:
    script = """
-- a comment; with a semicolon
CREATE TABLE t (a TEXT DEFAULT 'x;y');
CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN
    UPDATE t SET a = a || ';' WHERE rowid = new.rowid;
END;
/* a block comment; */ INSERT INTO t (a) VALUES ('1;2');
-- trailing comment
"""
    found = list(sqlite.statements(script))
    assert len(found) == 3
    assert found[1].strip().startswith("CREATE TRIGGER")
    assert found[1].rstrip().endswith("END;")
    conn = sqlite3.connect(":memory:")
    for statement in found:
        conn.execute(statement)
    assert conn.execute("SELECT a FROM t").fetchall() == [("1;2;",)]


def test_a_failing_step_leaves_the_earlier_ones_applied_and_nothing_of_itself(tmp_path: Path) -> None:
    steps = {
        "storage": (
            step("storage", 1, "CREATE TABLE one (a INTEGER);"),
            step("storage", 2, "CREATE TABLE two (a INTEGER); INSERT INTO missing VALUES (1);"),
        )
    }
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="no such table: missing"):
        migrations.migrate(sqlite._Target(conn), steps, "x.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "one" in tables
    assert "two" not in tables
    assert conn.execute("SELECT component, version FROM schema_versions").fetchall() == [("storage", 1)]
    # fixed, the runner goes on from there
    fixed = {"storage": (steps["storage"][0], step("storage", 2, "CREATE TABLE two (a INTEGER);"))}
    assert migrations.migrate(sqlite._Target(conn), fixed, "x.db") == ["storage v2"]
    assert migrations.migrate(sqlite._Target(conn), fixed, "x.db") == []


def test_the_checks_and_messages_are_the_runners(tmp_path: Path) -> None:
    steps = {"storage": (step("storage", 1, "CREATE TABLE one (a INTEGER);"),)}
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_versions VALUES ('storage', 2)")
    with pytest.raises(
        SchemaTooNew, match=r"x\.db: its storage schema version 2 is newer than this broker's \(1\)"
    ):
        migrations.migrate(sqlite._Target(conn), steps, "x.db")
    conn.execute("UPDATE schema_versions SET version = 1")
    conn.execute("INSERT INTO schema_versions VALUES ('tenants', 1)")
    with pytest.raises(SchemaTooNew, match="it holds a component this broker does not know"):
        migrations.migrate(sqlite._Target(conn), steps, "x.db")


def test_a_step_out_of_sequence_is_a_packaging_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fakebackend"
    for component in COMPONENTS:
        (package / "sql" / component).mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sql" / "storage" / "0001_a.sql").write_text("SELECT 1;")
    (package / "sql" / "storage" / "0003_c.sql").write_text("SELECT 1;")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"migration storage/0003_c\.sql is out of sequence"):
        migrations.load_steps("fakebackend")
