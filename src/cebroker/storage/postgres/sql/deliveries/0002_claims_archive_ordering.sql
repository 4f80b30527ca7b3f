-- Claims without scans, of many subscriptions in one statement; completions in one statement.
-- pipeline_claims counts each subscription's claimed deliveries; triggers on pipeline_deliveries
-- keep it, whichever statement claims, frees or removes one, so that a claim reads the count
-- from the row it locks instead of counting rows (a count that walked past every delivery
-- removed since the last vacuum). No index mentions owner any more, so a claim (owner set) is a
-- HOT update that touches no index, and the table keeps room on its pages for that and is
-- vacuumed often: it is a queue, most of its rows are short-lived. A dead instance's claims are
-- found by a scan, which only a take-over pays.
--
-- With it, the event archive and replays (cebroker.storage.archive) and ordered delivery: an
-- event row is ``archived`` when it is kept for the retention (else it lives as long as its
-- deliveries); a delivery may belong to a replay and to an ordering group (``orderkey``).
-- pipeline_archive keeps the archive's size in shards, as pipeline_backlog does, and the time up
-- to which pruning by size has removed events. The one-statement operations know them: the
-- claims return each delivery's replay; the append keeps events for the retention, holds a
-- delivery behind an earlier one of its ordering group and takes the replays' boundary lock;
-- the completion keeps archived events, counts replays' deliveries and frees the next delivery
-- of each ordering group. Ordering groups are locked by cebroker_lock_groups (see
-- cebroker.storage.postgres.ordering), here and in the statements sent from Python alike.
--
-- The delivery rules these functions hold are also written in Python for SQLite
-- (cebroker.storage.sqlite.deliveries, .ordering); docs/storage.md lists where each lives and
-- the contract suites (tests/storage/) pin them on both backends.
DROP INDEX pipeline_deliveries_claimed;
DROP INDEX pipeline_deliveries_owner;
ALTER TABLE pipeline_deliveries SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE pipeline_events SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
CREATE TABLE pipeline_claims (subscription text PRIMARY KEY, held int NOT NULL);
INSERT INTO pipeline_claims
    SELECT subscription, count(*) FROM pipeline_deliveries WHERE owner IS NOT NULL GROUP BY 1;
CREATE FUNCTION cebroker_count_claims() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    -- rows of the counts in subscription order, so that concurrent statements never deadlock
    FOR r IN
        SELECT c.subscription, sum(c.delta)::int AS delta FROM (
            SELECT o.subscription, -1 AS delta FROM old_rows o WHERE o.owner IS NOT NULL
            UNION ALL
            SELECT n.subscription, 1 FROM new_rows n WHERE n.owner IS NOT NULL
        ) c GROUP BY c.subscription HAVING sum(c.delta) <> 0 ORDER BY c.subscription
    LOOP
        INSERT INTO pipeline_claims AS p (subscription, held) VALUES (r.subscription, greatest(0, r.delta))
        ON CONFLICT (subscription) DO UPDATE SET held = greatest(0, p.held + r.delta);
    END LOOP;
    RETURN NULL;
END $$;
CREATE FUNCTION cebroker_count_claims_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT o.subscription, count(*)::int AS n FROM old_rows o WHERE o.owner IS NOT NULL
        GROUP BY o.subscription ORDER BY o.subscription
    LOOP
        UPDATE pipeline_claims SET held = greatest(0, held - r.n) WHERE subscription = r.subscription;
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER pipeline_deliveries_claims_updated AFTER UPDATE ON pipeline_deliveries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cebroker_count_claims();
CREATE TRIGGER pipeline_deliveries_claims_deleted AFTER DELETE ON pipeline_deliveries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cebroker_count_claims_deleted();
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
-- An ordering group's advisory lock key: the length prefix keeps (a, bc) and (ab, c) apart.
CREATE FUNCTION cebroker_group_key(p_sub text, p_group text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended(length(p_sub)::text || ':' || p_sub || p_group, 4242)
$$;
-- Lock the groups (until the transaction ends) in key order: two transactions never wait for
-- each other in a cycle.
CREATE FUNCTION cebroker_lock_groups(p_subs text[], p_groups text[]) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    k bigint;
BEGIN
    FOR k IN SELECT DISTINCT cebroker_group_key(g.sub, g.grp)
             FROM unnest(p_subs, p_groups) AS g (sub, grp) WHERE g.grp IS NOT NULL ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
END $$;
-- Deliveries of these groups left the log: lock the groups and make the lowest delivery of
-- each due if it was held; the subscriptions that got one.
CREATE FUNCTION cebroker_release_groups(p_subs text[], p_groups text[], p_now double precision,
        p_held double precision) RETURNS SETOF text
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cebroker_lock_groups(p_subs, p_groups);
    RETURN QUERY
    UPDATE pipeline_deliveries d SET next_at = p_now
    FROM (SELECT (SELECT min(x.id) FROM pipeline_deliveries x
                  WHERE x.subscription = g.sub AND x.orderkey = g.grp) AS id
          FROM (SELECT DISTINCT u.sub, u.grp FROM unnest(p_subs, p_groups) AS u (sub, grp)
                WHERE u.grp IS NOT NULL) AS g) AS h
    WHERE d.id = h.id AND d.next_at = p_held
    RETURNING d.subscription;
END $$;
DROP FUNCTION cebroker_claim(text, text, double precision, int, int, double precision);
CREATE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
        p_concurrency int, p_rate double precision)
    RETURNS TABLE (id bigint, event_seq bigint, attempts int, first_at double precision, body text,
                   replay text, next_due double precision, wait double precision)
    LANGUAGE plpgsql SET enable_bitmapscan = off AS $$
#variable_conflict use_column
DECLARE
    v_n int := p_limit;
    v_held int;
    v_tokens double precision;
    v_got int := 0;
    v_wait double precision := 0.0;
BEGIN
    -- The subscription's claims row is locked until commit: claims of one subscription, from
    -- every instance, take turns, so the count it holds stays true while this one decides.
    SELECT c.held INTO v_held FROM pipeline_claims c WHERE c.subscription = p_sub FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pipeline_claims VALUES (p_sub, 0) ON CONFLICT DO NOTHING;
        SELECT c.held INTO v_held FROM pipeline_claims c WHERE c.subscription = p_sub FOR UPDATE;
    END IF;
    IF p_concurrency IS NOT NULL THEN
        v_n := least(v_n, p_concurrency - v_held);
    END IF;
    IF p_rate IS NOT NULL THEN
        v_tokens := cebroker_refill('subscription ' || p_sub, p_rate, p_now);
        v_n := least(v_n, floor(v_tokens)::int);
        IF v_tokens < 1.0 THEN
            v_wait := (1.0 - v_tokens) / p_rate;
        END IF;
    END IF;
    -- Plans below must walk the due index in order (a bitmap scan would read every due row,
    -- and the table's statistics are rarely current: it is a queue).
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
        (SELECT d.next_at FROM pipeline_deliveries d WHERE d.subscription = p_sub AND d.owner IS NULL
            ORDER BY d.next_at LIMIT 1),
        v_wait;
END $$;
CREATE FUNCTION cebroker_claim_many(p_subs text[], p_owner text, p_now double precision, p_limits int[],
        p_concurrency int[], p_rates double precision[])
    RETURNS TABLE (subscription text, id bigint, event_seq bigint, attempts int, first_at double precision,
                   body text, replay text, next_due double precision, wait double precision)
    LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    -- bookkeeping, whose loss can only repeat work: its commit does not wait for the flush
    PERFORM set_config('synchronous_commit', 'off', true);
    -- in subscription order, as every statement that locks claims rows: no deadlock
    FOR i IN SELECT g FROM generate_subscripts(p_subs, 1) AS g ORDER BY p_subs[g] LOOP
        RETURN QUERY SELECT p_subs[i], c.* FROM cebroker_claim(p_subs[i], p_owner, p_now, p_limits[i],
            p_concurrency[i], p_rates[i]) AS c;
    END LOOP;
END $$;
CREATE FUNCTION cebroker_append(p_now double precision, p_horizon double precision, p_versions bigint[],
        p_sources text[], p_ids text[], p_bodies text[], p_items int[], p_subs text[], p_groups text[],
        p_keep boolean, p_held double precision, p_boundary bigint)
    RETURNS TABLE (item int, seq bigint, delivery bigint, subscription text, latest bigint)
    -- planned for each call's arrays: a plan made for arrays of unknown length joins a large
    -- batch's rows by nested loops
    LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
#variable_conflict use_column
DECLARE
    v_latest bigint;
    v_items int[];
    v_seqs bigint[];
    v_dids bigint[];
    v_dsubs text[];
    v_count bigint;
    v_events bigint;
    v_bytes bigint;
    v_shard int;
BEGIN
    -- Held (shared) until commit: a replay that must cover every event accepted before it
    -- waits for the appends in flight (cebroker.storage.archive).
    PERFORM pg_advisory_xact_lock_shared(p_boundary);
    -- Before any delivery id is drawn, so that a group's ids grow in the order its deliveries
    -- were written, and the statement below sees every delivery of the group written before.
    IF p_groups IS NOT NULL THEN
        PERFORM cebroker_lock_groups(p_subs, p_groups);
    END IF;
    -- Items matched against an older subscription version are left out (the caller matches
    -- them again); of the others, the first of each (source, id) is fresh if this statement
    -- wrote its key (also against another instance: the second writer waits, then finds it).
    SELECT version INTO v_latest FROM subscription_version;
    WITH items AS MATERIALIZED (
        SELECT u.item::int, u.source, u.id, u.body
        FROM unnest(p_versions, p_sources, p_ids, p_bodies) WITH ORDINALITY
            AS u (version, source, id, body, item)
        WHERE u.version IS NULL OR u.version >= v_latest),
    firsts AS MATERIALIZED (
        SELECT DISTINCT ON (i.source, i.id) i.item, i.source, i.id FROM items i
        ORDER BY i.source, i.id, i.item),
    fresh AS (
        INSERT INTO pipeline_seen AS s (source, id, at)
        SELECT f.source, f.id, p_now FROM firsts f ORDER BY f.source, f.id
        ON CONFLICT (source, id) DO UPDATE SET at = excluded.at WHERE s.at < p_horizon
        RETURNING s.source, s.id),
    kept AS MATERIALIZED (
        SELECT f.item FROM firsts f JOIN fresh k ON k.source = f.source AND k.id = f.id),
    wanted AS MATERIALIZED (
        SELECT d.item, d.sub, d.grp, d.n
        FROM unnest(p_items, p_subs, coalesce(p_groups, array_fill(NULL::text, ARRAY[cardinality(p_items)])))
            WITH ORDINALITY AS d (item, sub, grp, n)
        JOIN kept k ON k.item = d.item),
    numbered AS MATERIALIZED (
        SELECT i.item, i.body, nextval('pipeline_events_seq') AS seq FROM items i
        WHERE i.item IN (SELECT w.item FROM wanted w) OR (p_keep AND i.item IN (SELECT k.item FROM kept k))
        ORDER BY i.item),
    events AS (
        INSERT INTO pipeline_events (seq, body, received, archived)
        SELECT n.seq, n.body, p_now, p_keep FROM numbered n),
    busy AS MATERIALIZED (
        SELECT DISTINCT w.sub, w.grp FROM wanted w WHERE w.grp IS NOT NULL AND EXISTS
            (SELECT 1 FROM pipeline_deliveries x WHERE x.subscription = w.sub AND x.orderkey = w.grp)),
    deliveries AS MATERIALIZED (
        SELECT w.item, n.seq, w.sub, w.grp, w.n, nextval('pipeline_deliveries_seq') AS id
        FROM wanted w JOIN numbered n ON n.item = w.item ORDER BY w.item, w.n),
    inserted AS (
        -- a delivery waits behind an earlier one of its group: in the log, or written just before
        INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at, orderkey)
        SELECT d.id, d.seq, d.sub, 0,
            CASE WHEN d.grp IS NOT NULL AND (
                    EXISTS (SELECT 1 FROM busy b WHERE b.sub = d.sub AND b.grp = d.grp)
                    OR d.id > (SELECT min(y.id) FROM deliveries y WHERE y.sub = d.sub AND y.grp = d.grp))
                 THEN p_held ELSE p_now END,
            p_now, d.grp
        FROM deliveries d)
    SELECT array_agg(k.item ORDER BY k.item, d.id), array_agg(coalesce(d.seq, n.seq) ORDER BY k.item, d.id),
        array_agg(d.id ORDER BY k.item, d.id), array_agg(d.sub ORDER BY k.item, d.id),
        (SELECT count(*) FROM numbered), (SELECT sum(octet_length(x.body)) FROM numbered x)
    INTO v_items, v_seqs, v_dids, v_dsubs, v_events, v_bytes
    FROM kept k LEFT JOIN numbered n ON n.item = k.item LEFT JOIN deliveries d ON d.item = k.item;
    -- A shard picked at random: this transaction holds its row until its commit is flushed, and
    -- two instances' connections may share a backend pid modulo 64. No NOTIFY here: commits of
    -- notifying transactions take turns (the server serializes them), and this one waits for
    -- its flush; the caller announces the deliveries once it has committed.
    v_count := (SELECT count(*) FROM unnest(v_dids) AS x WHERE x IS NOT NULL);
    v_shard := floor(random() * 64)::int;  -- once: in the WHERE clause it is drawn per row
    IF v_count > 0 THEN
        UPDATE pipeline_backlog SET pending = pending + v_count WHERE shard = v_shard;
    END IF;
    IF p_keep AND v_events > 0 THEN
        UPDATE pipeline_archive SET events = events + v_events, bytes = bytes + v_bytes WHERE shard = v_shard;
    END IF;
    RETURN QUERY SELECT 0, NULL::bigint, NULL::bigint, NULL::text, v_latest
        UNION ALL SELECT t.item, t.seq, t.delivery, t.sub, NULL::bigint
        FROM unnest(v_items, v_seqs, v_dids, v_dsubs) AS t (item, seq, delivery, sub);
END $$;
CREATE FUNCTION cebroker_complete(p_ids bigint[], p_now double precision, p_held double precision)
    RETURNS int LANGUAGE plpgsql SET enable_bitmapscan = off AS $$
DECLARE
    v_seqs bigint[];
    v_subs text[];
    v_groups text[];
    v_replays text[];
    v_due text;
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- bookkeeping, as claims
    WITH gone AS (DELETE FROM pipeline_deliveries d WHERE d.id = ANY(p_ids)
                  RETURNING d.event_seq, d.subscription, d.orderkey, d.replay)
    SELECT array_agg(event_seq), array_agg(subscription), array_agg(orderkey), array_agg(replay)
    INTO v_seqs, v_subs, v_groups, v_replays FROM gone;
    IF v_seqs IS NULL THEN
        RETURN 0;
    END IF;
    -- an event kept for the retention stays; the others go with their last delivery
    DELETE FROM pipeline_events e WHERE e.seq = ANY(v_seqs) AND NOT e.archived
        AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries d WHERE d.event_seq = e.seq);
    INSERT INTO pipeline_stats AS s (subscription, delivered)
        SELECT t.sub, count(*) FROM unnest(v_subs) AS t (sub) GROUP BY t.sub ORDER BY t.sub
        ON CONFLICT (subscription) DO UPDATE SET delivered = s.delivered + excluded.delivered;
    UPDATE pipeline_backlog SET pending = pending - cardinality(v_seqs) WHERE shard = pg_backend_pid() % 64;
    -- replays' rows in replay order, as every transaction that counts them
    FOR r IN SELECT t.replay, count(*) AS n FROM unnest(v_replays) AS t (replay)
             WHERE t.replay IS NOT NULL GROUP BY t.replay ORDER BY t.replay LOOP
        UPDATE pipeline_replays SET delivered = delivered + r.n WHERE id = r.replay;
    END LOOP;
    IF EXISTS (SELECT 1 FROM unnest(v_groups) AS g WHERE g IS NOT NULL) THEN
        SELECT string_agg(DISTINCT x, ' ') INTO v_due
        FROM cebroker_release_groups(v_subs, v_groups, p_now, p_held) AS x;
        IF v_due IS NOT NULL THEN
            PERFORM pg_notify('cebroker_due', v_due);
        END IF;
    END IF;
    RETURN cardinality(v_seqs);
END $$;
