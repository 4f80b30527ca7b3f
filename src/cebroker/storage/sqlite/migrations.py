"""Versioned schemas of every table the broker keeps in its SQLite file.

Each component (``storage``, ``subscriptions``, ``deliveries``, ``registry``) has a list of
migration steps; version ``n`` is the schema after step ``n``. The version of each component
is a row of ``schema_versions``. Version 1 of each is the schema of the releases that had no
version row for it (only the subscription store kept one), written with ``IF NOT EXISTS``, so
such a file opens without loss. A file that records a version newer than this code, or a
component it does not know, was written by a newer release and is refused before anything
changes. A new step is appended to a component's list and never edits an earlier one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cebroker.storage.errors import SchemaTooNew

_STORAGE_V1 = """
CREATE TABLE IF NOT EXISTS storage_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1), at REAL NOT NULL);
"""

_SUBSCRIPTIONS_V1 = """
CREATE TABLE IF NOT EXISTS subscriptions (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    id        TEXT    NOT NULL UNIQUE,
    protocol  TEXT    NOT NULL,
    sink      TEXT    NOT NULL,
    source    TEXT,
    revision  INTEGER NOT NULL,
    doc       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS subscriptions_protocol ON subscriptions (protocol, seq);
CREATE INDEX IF NOT EXISTS subscriptions_sink ON subscriptions (sink, seq);
CREATE INDEX IF NOT EXISTS subscriptions_source ON subscriptions (source, seq);
CREATE TABLE IF NOT EXISTS subscription_types (
    type TEXT    NOT NULL,
    seq  INTEGER NOT NULL REFERENCES subscriptions (seq) ON DELETE CASCADE,
    PRIMARY KEY (type, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS subscription_types_seq ON subscription_types (seq);
"""

#: Each subscription's tenant, indexed for tenant listings and the per-tenant count.
_SUBSCRIPTIONS_V2 = """
ALTER TABLE subscriptions ADD COLUMN tenant TEXT;
CREATE INDEX IF NOT EXISTS subscriptions_tenant ON subscriptions (tenant, seq);
"""

_DELIVERIES_V1 = """
CREATE TABLE IF NOT EXISTS pipeline_events (
    seq INTEGER PRIMARY KEY, body TEXT NOT NULL, received REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pipeline_seen (
    source TEXT NOT NULL, id TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (source, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pipeline_seen_at ON pipeline_seen (at);
CREATE TABLE IF NOT EXISTS pipeline_deliveries (
    id INTEGER PRIMARY KEY, event_seq INTEGER NOT NULL, subscription TEXT NOT NULL,
    attempts INTEGER NOT NULL, next_at REAL NOT NULL, first_at REAL NOT NULL, last_error TEXT);
CREATE INDEX IF NOT EXISTS pipeline_deliveries_due ON pipeline_deliveries (subscription, next_at);
CREATE INDEX IF NOT EXISTS pipeline_deliveries_event ON pipeline_deliveries (event_seq);
CREATE TABLE IF NOT EXISTS pipeline_deadletters (
    id INTEGER PRIMARY KEY, subscription TEXT NOT NULL, event TEXT NOT NULL, status TEXT, body TEXT,
    attempts INTEGER NOT NULL, last_error TEXT NOT NULL, first_at REAL NOT NULL, failed_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS pipeline_deadletters_sub ON pipeline_deadletters (subscription, id);
CREATE TABLE IF NOT EXISTS pipeline_stats (
    subscription TEXT PRIMARY KEY, delivered INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
    deadlettered INTEGER NOT NULL DEFAULT 0, last_error TEXT, last_error_at REAL) WITHOUT ROWID;
"""

# The event archive and replays (cebroker.storage.archive) and ordered delivery: an event row
# is ``archived`` when it is kept for the retention (else it lives as long as its deliveries);
# a delivery may belong to a replay and to an ordering group (``orderkey``); pipeline_archive
# keeps the archive's size, and the time up to which pruning by size has removed events.
_DELIVERIES_V2 = """
ALTER TABLE pipeline_events ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS pipeline_events_archive ON pipeline_events (received, seq) WHERE archived = 1;
ALTER TABLE pipeline_deliveries ADD COLUMN replay TEXT;
ALTER TABLE pipeline_deliveries ADD COLUMN orderkey TEXT;
CREATE INDEX IF NOT EXISTS pipeline_deliveries_order ON pipeline_deliveries (subscription, orderkey, id)
    WHERE orderkey IS NOT NULL;
CREATE INDEX IF NOT EXISTS pipeline_deliveries_replay ON pipeline_deliveries (replay)
    WHERE replay IS NOT NULL;
CREATE TABLE IF NOT EXISTS pipeline_replays (
    id TEXT PRIMARY KEY, subscription TEXT NOT NULL, created REAL NOT NULL,
    since REAL NOT NULL, until REAL NOT NULL, last_seq INTEGER, filter TEXT, events INTEGER,
    at_time REAL NOT NULL, at_seq INTEGER NOT NULL, cancelled INTEGER NOT NULL DEFAULT 0,
    scanned INTEGER NOT NULL DEFAULT 0, queued INTEGER NOT NULL DEFAULT 0,
    delivered INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
    deadlettered INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pipeline_replays_sub ON pipeline_replays (subscription, created);
CREATE TABLE IF NOT EXISTS pipeline_archive (
    one INTEGER PRIMARY KEY CHECK (one = 1), events INTEGER NOT NULL, bytes INTEGER NOT NULL,
    pruned_to REAL NOT NULL);
INSERT OR IGNORE INTO pipeline_archive VALUES (1, 0, 0, 0.0)
"""

# Open circuits of subscriptions whose sinks are down (cebroker.storage.circuits).
_DELIVERIES_V3 = """
CREATE TABLE IF NOT EXISTS pipeline_circuits (
    subscription TEXT PRIMARY KEY, opened_at REAL NOT NULL, next_probe_at REAL NOT NULL,
    failed_probes INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL, probe_until REAL) WITHOUT ROWID;
"""

_REGISTRY_V1 = """
CREATE TABLE IF NOT EXISTS xreg_entity (
    xid    TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    coll   TEXT NOT NULL,
    kind   TEXT NOT NULL,
    eid    TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    attrs  TEXT NOT NULL,
    doc    BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS xreg_entity_sibling ON xreg_entity (parent, coll, lower(eid));
CREATE INDEX IF NOT EXISTS xreg_entity_children ON xreg_entity (parent, coll, seq);
"""

#: component -> its migration steps, oldest first (version n = after step n).
MIGRATIONS: dict[str, tuple[str, ...]] = {
    "storage": (_STORAGE_V1,),
    "subscriptions": (_SUBSCRIPTIONS_V1, _SUBSCRIPTIONS_V2),
    "deliveries": (_DELIVERIES_V1, _DELIVERIES_V2, _DELIVERIES_V3),
    "registry": (_REGISTRY_V1,),
}


def latest() -> dict[str, int]:
    """The version of each component this code writes."""
    return {component: len(steps) for component, steps in MIGRATIONS.items()}


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring every component's schema up to date in one transaction.

    Raises:
        SchemaTooNew: the file was written by a newer release; nothing was changed.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions"
            " (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        stored = {str(c): int(v) for c, v in conn.execute("SELECT component, version FROM schema_versions")}
        for component, version in sorted(stored.items()):
            if component not in MIGRATIONS:
                raise SchemaTooNew(
                    f"{path}: it holds a component this broker does not know ({component!r}, schema"
                    f" version {version}): it was written by a newer release"
                )
            if version > len(MIGRATIONS[component]):
                raise SchemaTooNew(
                    f"{path}: its {component} schema version {version} is newer than this broker's"
                    f" ({len(MIGRATIONS[component])}): it was written by a newer release"
                )
        for component, steps in MIGRATIONS.items():
            current = stored.get(component, 0)
            for step in steps[current:]:
                for statement in step.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            if current < len(steps):
                conn.execute(
                    "INSERT OR REPLACE INTO schema_versions (component, version) VALUES (?, ?)",
                    (component, len(steps)),
                )
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
