-- De-duplication per publishing tenant: a key is (tenant, source, id), so that one tenant cannot
-- suppress another tenant's events by publishing their (source, id) first. "" is no tenant (the
-- operator's sources, an admin, no authentication). Keys written before this step belong to no
-- tenant. SQLite cannot change a primary key in place: the table is written again.
CREATE TABLE pipeline_seen_by_tenant (
    tenant TEXT NOT NULL, source TEXT NOT NULL, id TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (tenant, source, id)) WITHOUT ROWID;
INSERT INTO pipeline_seen_by_tenant (tenant, source, id, at) SELECT '', source, id, at FROM pipeline_seen;
DROP TABLE pipeline_seen;
ALTER TABLE pipeline_seen_by_tenant RENAME TO pipeline_seen;
CREATE INDEX pipeline_seen_at ON pipeline_seen (at);
