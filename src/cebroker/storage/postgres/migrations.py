"""Versioned schemas of every table the broker keeps in PostgreSQL, applied under an advisory lock.

The components and their versions are those of the SQLite backend (``storage``,
``subscriptions``, ``deliveries``, ``registry``), each a list of steps; version ``n`` is the
schema after step ``n``, recorded in ``schema_versions``. :func:`migrate` runs in one
transaction that first takes a transaction-level advisory lock, so several instances starting
at once on a fresh database apply each step exactly once: the others wait, then find nothing
left to do. A database holding a newer version (or an unknown component) is refused before
anything changes. A new step is appended to a component's list and never edits an earlier one.
"""

from __future__ import annotations

import psycopg

from cebroker.storage.errors import SchemaTooNew

#: The advisory lock key of schema migrations (any constant the broker alone uses).
MIGRATION_LOCK = 0x63656272_6F6B6572 & 0x7FFF_FFFF_FFFF_FFFF

_STORAGE_V1 = """
CREATE TABLE storage_probe (id int PRIMARY KEY CHECK (id = 1), at double precision NOT NULL);
"""

# subscription_changes holds every change with its version; subscription_version is the one row
# every subscription write locks, so versions are handed out, and committed, in order.
_SUBSCRIPTIONS_V1 = """
CREATE TABLE subscriptions (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id       text   NOT NULL UNIQUE,
    protocol text   NOT NULL,
    sink     text   NOT NULL,
    source   text,
    revision int    NOT NULL,
    doc      text   NOT NULL
);
CREATE INDEX subscriptions_protocol ON subscriptions (protocol, seq);
CREATE INDEX subscriptions_sink ON subscriptions (sink, seq);
CREATE INDEX subscriptions_source ON subscriptions (source, seq);
CREATE TABLE subscription_types (
    type text   NOT NULL,
    seq  bigint NOT NULL REFERENCES subscriptions (seq) ON DELETE CASCADE,
    PRIMARY KEY (type, seq)
);
CREATE INDEX subscription_types_seq ON subscription_types (seq);
CREATE TABLE subscription_version (one int PRIMARY KEY CHECK (one = 1), version bigint NOT NULL);
INSERT INTO subscription_version VALUES (1, 0);
CREATE TABLE subscription_changes (
    version  bigint PRIMARY KEY,
    kind     text   NOT NULL,
    id       text   NOT NULL,
    revision int    NOT NULL,
    doc      text   NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
"""

# owner: the instance that claimed the delivery (NULL: free). pipeline_backlog keeps the count
# of deliveries in shards (one per connection, by backend pid), so that counting is cheap and
# concurrent transactions do not queue on one counter row.
_DELIVERIES_V1 = """
CREATE TABLE pipeline_events (seq bigint PRIMARY KEY, body text NOT NULL, received double precision NOT NULL);
CREATE SEQUENCE pipeline_events_seq;
CREATE TABLE pipeline_seen (
    source text NOT NULL, id text NOT NULL, at double precision NOT NULL, PRIMARY KEY (source, id));
CREATE INDEX pipeline_seen_at ON pipeline_seen (at);
CREATE TABLE pipeline_deliveries (
    id bigint PRIMARY KEY, event_seq bigint NOT NULL, subscription text NOT NULL,
    attempts int NOT NULL, next_at double precision NOT NULL, first_at double precision NOT NULL,
    last_error text, owner text);
CREATE SEQUENCE pipeline_deliveries_seq;
CREATE INDEX pipeline_deliveries_due ON pipeline_deliveries (subscription, next_at, id);
CREATE INDEX pipeline_deliveries_event ON pipeline_deliveries (event_seq);
CREATE INDEX pipeline_deliveries_claimed ON pipeline_deliveries (subscription, owner) WHERE owner IS NOT NULL;
CREATE INDEX pipeline_deliveries_owner ON pipeline_deliveries (owner) WHERE owner IS NOT NULL;
CREATE TABLE pipeline_deadletters (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, subscription text NOT NULL, event text NOT NULL,
    status text, body text, attempts int NOT NULL, last_error text NOT NULL,
    first_at double precision NOT NULL, failed_at double precision NOT NULL);
CREATE INDEX pipeline_deadletters_sub ON pipeline_deadletters (subscription, id);
CREATE TABLE pipeline_stats (
    subscription text PRIMARY KEY, delivered bigint NOT NULL DEFAULT 0, failed bigint NOT NULL DEFAULT 0,
    deadlettered bigint NOT NULL DEFAULT 0, last_error text, last_error_at double precision);
CREATE TABLE pipeline_backlog (shard int PRIMARY KEY, pending bigint NOT NULL);
INSERT INTO pipeline_backlog SELECT g, 0 FROM generate_series(0, 63) AS g;
CREATE TABLE pipeline_buckets (key text PRIMARY KEY, tokens double precision NOT NULL,
    stamp double precision NOT NULL);
CREATE TABLE broker_instances (
    id text PRIMARY KEY, host text NOT NULL, pid int NOT NULL,
    started timestamptz NOT NULL DEFAULT clock_timestamp(), heartbeat timestamptz NOT NULL);
CREATE FUNCTION cebroker_refill(p_key text, p_rate double precision, p_now double precision,
        OUT tokens double precision)
    LANGUAGE sql AS $$
    INSERT INTO pipeline_buckets AS b (key, tokens, stamp) VALUES (p_key, greatest(1.0, p_rate), p_now)
    ON CONFLICT (key) DO UPDATE SET
        tokens = least(greatest(1.0, p_rate), b.tokens + greatest(0.0, p_now - b.stamp) * p_rate),
        stamp = greatest(b.stamp, p_now)
    RETURNING b.tokens $$;
CREATE FUNCTION cebroker_take(p_key text, p_rate double precision, p_now double precision)
    RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    v_tokens double precision := cebroker_refill(p_key, p_rate, p_now);
BEGIN
    IF v_tokens >= 1.0 THEN
        UPDATE pipeline_buckets SET tokens = v_tokens - 1.0 WHERE key = p_key;
        RETURN 0.0;
    END IF;
    RETURN (1.0 - v_tokens) / p_rate;
END $$;
CREATE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
        p_concurrency int, p_rate double precision)
    RETURNS TABLE (id bigint, event_seq bigint, attempts int, first_at double precision, body text,
                   next_due double precision, wait double precision)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_n int := p_limit;
    v_held int;
    v_tokens double precision;
    v_got int := 0;
    v_wait double precision := 0.0;
BEGIN
    -- The subscription's bucket row is locked until commit: claims of one subscription, from
    -- every instance, take turns, so the count of claimed deliveries below stays true.
    v_tokens := cebroker_refill('subscription ' || p_sub, coalesce(p_rate, 1.0), p_now);
    IF p_concurrency IS NOT NULL THEN
        SELECT count(*) INTO v_held FROM pipeline_deliveries d
            WHERE d.subscription = p_sub AND d.owner IS NOT NULL;
        v_n := least(v_n, p_concurrency - v_held);
    END IF;
    IF p_rate IS NOT NULL THEN
        v_n := least(v_n, floor(v_tokens)::int);
        IF v_tokens < 1.0 THEN
            v_wait := (1.0 - v_tokens) / p_rate;
        END IF;
    END IF;
    IF v_n > 0 THEN
        RETURN QUERY
        WITH picked AS (
            SELECT d.id FROM pipeline_deliveries d
            WHERE d.subscription = p_sub AND d.owner IS NULL AND d.next_at <= p_now
            ORDER BY d.next_at, d.id LIMIT v_n FOR UPDATE SKIP LOCKED),
        claimed AS (
            UPDATE pipeline_deliveries d SET owner = p_owner FROM picked WHERE d.id = picked.id
            RETURNING d.id, d.event_seq, d.attempts, d.first_at, d.next_at)
        SELECT c.id, c.event_seq, c.attempts, c.first_at, e.body,
            NULL::double precision, 0.0::double precision
        FROM claimed c JOIN pipeline_events e ON e.seq = c.event_seq ORDER BY c.next_at, c.id;
        GET DIAGNOSTICS v_got = ROW_COUNT;
    END IF;
    IF p_rate IS NOT NULL AND v_got > 0 THEN
        UPDATE pipeline_buckets SET tokens = v_tokens - v_got WHERE key = 'subscription ' || p_sub;
    END IF;
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::int, NULL::double precision, NULL::text,
        (SELECT min(d.next_at) FROM pipeline_deliveries d WHERE d.subscription = p_sub AND d.owner IS NULL),
        v_wait;
END $$;
"""

# The event archive and replays (cebroker.storage.archive) and ordered delivery: an event row
# is ``archived`` when it is kept for the retention (else it lives as long as its deliveries);
# a delivery may belong to a replay and to an ordering group (``orderkey``). pipeline_archive
# keeps the archive's size in shards, as pipeline_backlog does, and the time up to which
# pruning by size has removed events. The claim also returns each delivery's replay.
_DELIVERIES_V2 = """
ALTER TABLE pipeline_events ADD COLUMN archived boolean NOT NULL DEFAULT false;
CREATE INDEX pipeline_events_archive ON pipeline_events (received, seq) WHERE archived;
ALTER TABLE pipeline_deliveries ADD COLUMN replay text, ADD COLUMN orderkey text;
CREATE INDEX pipeline_deliveries_order ON pipeline_deliveries (subscription, orderkey, id)
    WHERE orderkey IS NOT NULL;
CREATE INDEX pipeline_deliveries_replay ON pipeline_deliveries (replay) WHERE replay IS NOT NULL;
CREATE TABLE pipeline_replays (
    id text PRIMARY KEY, subscription text NOT NULL, created double precision NOT NULL,
    since double precision NOT NULL, until double precision NOT NULL, last_seq bigint, filter text,
    events bigint, at_time double precision NOT NULL, at_seq bigint NOT NULL,
    cancelled boolean NOT NULL DEFAULT false, scanned boolean NOT NULL DEFAULT false,
    queued bigint NOT NULL DEFAULT 0, delivered bigint NOT NULL DEFAULT 0, failed bigint NOT NULL DEFAULT 0,
    deadlettered bigint NOT NULL DEFAULT 0, removed bigint NOT NULL DEFAULT 0);
CREATE INDEX pipeline_replays_sub ON pipeline_replays (subscription, created);
CREATE TABLE pipeline_archive (shard int PRIMARY KEY, events bigint NOT NULL, bytes bigint NOT NULL,
    pruned_to double precision NOT NULL);
INSERT INTO pipeline_archive SELECT g, 0, 0, 0.0 FROM generate_series(0, 63) AS g;
DROP FUNCTION cebroker_claim(text, text, double precision, int, int, double precision);
CREATE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
        p_concurrency int, p_rate double precision)
    RETURNS TABLE (id bigint, event_seq bigint, attempts int, first_at double precision, body text,
                   replay text, next_due double precision, wait double precision)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_n int := p_limit;
    v_held int;
    v_tokens double precision;
    v_got int := 0;
    v_wait double precision := 0.0;
BEGIN
    -- The subscription's bucket row is locked until commit: claims of one subscription, from
    -- every instance, take turns, so the count of claimed deliveries below stays true.
    v_tokens := cebroker_refill('subscription ' || p_sub, coalesce(p_rate, 1.0), p_now);
    IF p_concurrency IS NOT NULL THEN
        SELECT count(*) INTO v_held FROM pipeline_deliveries d
            WHERE d.subscription = p_sub AND d.owner IS NOT NULL;
        v_n := least(v_n, p_concurrency - v_held);
    END IF;
    IF p_rate IS NOT NULL THEN
        v_n := least(v_n, floor(v_tokens)::int);
        IF v_tokens < 1.0 THEN
            v_wait := (1.0 - v_tokens) / p_rate;
        END IF;
    END IF;
    IF v_n > 0 THEN
        RETURN QUERY
        WITH picked AS (
            SELECT d.id FROM pipeline_deliveries d
            WHERE d.subscription = p_sub AND d.owner IS NULL AND d.next_at <= p_now
            ORDER BY d.next_at, d.id LIMIT v_n FOR UPDATE SKIP LOCKED),
        claimed AS (
            UPDATE pipeline_deliveries d SET owner = p_owner FROM picked WHERE d.id = picked.id
            RETURNING d.id, d.event_seq, d.attempts, d.first_at, d.next_at, d.replay)
        SELECT c.id, c.event_seq, c.attempts, c.first_at, e.body, c.replay,
            NULL::double precision, 0.0::double precision
        FROM claimed c JOIN pipeline_events e ON e.seq = c.event_seq ORDER BY c.next_at, c.id;
        GET DIAGNOSTICS v_got = ROW_COUNT;
    END IF;
    IF p_rate IS NOT NULL AND v_got > 0 THEN
        UPDATE pipeline_buckets SET tokens = v_tokens - v_got WHERE key = 'subscription ' || p_sub;
    END IF;
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::int, NULL::double precision, NULL::text,
        NULL::text,
        (SELECT min(d.next_at) FROM pipeline_deliveries d WHERE d.subscription = p_sub AND d.owner IS NULL),
        v_wait;
END $$;
"""

# xid sorts bytewise ("C"): the subtree of x is the range [x/, x0), '/' sorting right before '0'.
_REGISTRY_V1 = """
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
"""

#: component -> its migration steps, oldest first (version n = after step n).
MIGRATIONS: dict[str, tuple[str, ...]] = {
    "storage": (_STORAGE_V1,),
    "subscriptions": (_SUBSCRIPTIONS_V1,),
    "deliveries": (_DELIVERIES_V1, _DELIVERIES_V2),
    "registry": (_REGISTRY_V1,),
}


def latest() -> dict[str, int]:
    """The version of each component this code writes."""
    return {component: len(steps) for component, steps in MIGRATIONS.items()}


def migrate(conn: psycopg.Connection[tuple[object, ...]], name: str) -> list[str]:
    """Bring every component's schema up to date in one transaction, under the migration lock;
    returns the steps applied (``component vN``), none when another instance did them.

    Raises:
        SchemaTooNew: the database was written by a newer release; nothing was changed.
    """
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions (component text PRIMARY KEY, version int NOT NULL)"
        )
        rows = conn.execute("SELECT component, version FROM schema_versions").fetchall()
        stored = {str(component): int(str(version)) for component, version in rows}
        for component, version in sorted(stored.items()):
            if component not in MIGRATIONS:
                raise SchemaTooNew(
                    f"{name}: it holds a component this broker does not know ({component!r}, schema"
                    f" version {version}): it was written by a newer release"
                )
            if version > len(MIGRATIONS[component]):
                raise SchemaTooNew(
                    f"{name}: its {component} schema version {version} is newer than this broker's"
                    f" ({len(MIGRATIONS[component])}): it was written by a newer release"
                )
        for component, steps in MIGRATIONS.items():
            current = stored.get(component, 0)
            for number, step in enumerate(steps[current:], start=current + 1):
                conn.execute(step.encode())
                applied.append(f"{component} v{number}")
            if current < len(steps):
                conn.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (%s, %s)"
                    " ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                    (component, len(steps)),
                )
    return applied
