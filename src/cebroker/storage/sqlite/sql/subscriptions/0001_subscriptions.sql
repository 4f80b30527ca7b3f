-- The subscriptions and their types' index (IF NOT EXISTS: the releases before versions).
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
