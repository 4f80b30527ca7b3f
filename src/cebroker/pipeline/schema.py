"""SQL of the durable log: the ``pipeline_*`` tables and the statements that write them in bulk."""

from __future__ import annotations

SCHEMA = """
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

BUMP = (
    "INSERT INTO pipeline_stats (subscription, {col}) VALUES (?, ?) "
    "ON CONFLICT (subscription) DO UPDATE SET {col} = {col} + excluded.{col}"
)
#: The array indexes (as a JSON array) of ``[source, id]`` pairs seen after the horizon.
SEEN_LOOKUP = (
    "SELECT json_group_array(k.key) FROM json_each(?1) AS k WHERE EXISTS (SELECT 1 FROM pipeline_seen s "
    "WHERE s.source = k.value->>0 AND s.id = k.value->>1 AND s.at >= ?2)"
)
SEEN_INSERT = (
    "INSERT INTO pipeline_seen (source, id, at) SELECT value->>0, value->>1, ?2 FROM json_each(?1) "
    "WHERE true ON CONFLICT (source, id) DO UPDATE SET at = excluded.at"
)
# ``value->1`` is the event object as JSON text (SQLite keeps number and string spellings).
EVENTS_INSERT = (
    "INSERT INTO pipeline_events (seq, body, received) SELECT value->>0, value->1, ?2 FROM json_each(?1)"
)
DELIVERIES_INSERT = (
    "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at) "
    "SELECT value->>0, value->>1, value->>2, 0, ?2, ?2 FROM json_each(?1)"
)
GC_EVENT = (
    "DELETE FROM pipeline_events WHERE seq = ?1 "
    "AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries WHERE event_seq = ?1)"
)
