-- Version 1 of each component is the schema of the releases before versioned migrations,
-- written with IF NOT EXISTS, so such a file opens without loss.
-- The recovery probe's row: one small durable write that tells the storage is back.
CREATE TABLE IF NOT EXISTS storage_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1), at REAL NOT NULL);
