-- The registry's entities.
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
