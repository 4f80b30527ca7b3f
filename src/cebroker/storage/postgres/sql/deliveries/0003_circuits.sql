-- Open circuits of subscriptions whose sinks are down (cebroker.storage.circuits): one row each,
-- written per transition and per probe, never per waiting delivery.
CREATE TABLE pipeline_circuits (
    subscription text PRIMARY KEY, opened_at double precision NOT NULL,
    next_probe_at double precision NOT NULL, failed_probes int NOT NULL DEFAULT 0,
    last_error text NOT NULL, probe_until double precision);
