-- The delivery log: events, de-duplication keys, deliveries, dead letters and counts.
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
