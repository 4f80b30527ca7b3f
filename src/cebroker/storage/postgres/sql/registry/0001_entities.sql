-- The registry's entities. xid sorts bytewise ("C"): the subtree of x is the range [x/, x0),
-- '/' sorting right before '0'.
CREATE TABLE xreg_entity (
    xid    text COLLATE "C" PRIMARY KEY,
    parent text NOT NULL,
    coll   text NOT NULL,
    kind   text NOT NULL,
    eid    text NOT NULL,
    seq    bigint NOT NULL,
    attrs  text NOT NULL,
    doc    bytea
);
CREATE UNIQUE INDEX xreg_entity_sibling ON xreg_entity (parent, coll, lower(eid));
CREATE INDEX xreg_entity_children ON xreg_entity (parent, coll, seq);
CREATE INDEX xreg_entity_kind ON xreg_entity (kind, coll, seq);
