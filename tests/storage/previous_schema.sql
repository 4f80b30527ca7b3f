-- The tables as the release before the storage layer created them, statement for statement:
-- the subscription store (with its schema_versions row), the event pipeline's log and the
-- registry, each created by its own module, with no version recorded for the last two.
CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
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
INSERT OR REPLACE INTO schema_versions (component, version) VALUES ('subscriptions', 1);
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
