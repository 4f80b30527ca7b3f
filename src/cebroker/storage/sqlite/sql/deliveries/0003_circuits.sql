-- Open circuits of subscriptions whose sinks are down (cebroker.storage.circuits).
CREATE TABLE IF NOT EXISTS pipeline_circuits (
    subscription TEXT PRIMARY KEY, opened_at REAL NOT NULL, next_probe_at REAL NOT NULL,
    failed_probes INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL, probe_until REAL) WITHOUT ROWID;
