-- The event archive and replays (cebroker.storage.archive) and ordered delivery: an event row
-- is ``archived`` when it is kept for the retention (else it lives as long as its deliveries);
-- a delivery may belong to a replay and to an ordering group (``orderkey``); pipeline_archive
-- keeps the archive's size, and the time up to which pruning by size has removed events.
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
INSERT OR IGNORE INTO pipeline_archive VALUES (1, 0, 0, 0.0);
