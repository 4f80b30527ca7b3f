-- Every registry write takes the next registry version and announces it (NOTIFY
-- cebroker_registry), so that every instance rebuilds what it derives from the registry (the
-- definition index of --event-validation) when another instance writes.
CREATE TABLE xreg_version (one int PRIMARY KEY CHECK (one = 1), version bigint NOT NULL);
INSERT INTO xreg_version VALUES (1, 0);
