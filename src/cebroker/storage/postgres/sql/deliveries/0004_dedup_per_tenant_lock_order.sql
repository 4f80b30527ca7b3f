-- De-duplication per publishing tenant, and one lock order for every server function.
--
-- A de-duplication key is (tenant, source, id): one tenant cannot suppress another tenant's events
-- by publishing their (source, id) first. '' is no tenant (the operator's sources, an admin, no
-- authentication). Keys written before this step belong to no tenant. cebroker_append takes the
-- publishers' tenants as one more array.
--
-- The lock order (docs/deploy.md): the replays' boundary lock; the delivery rows a statement
-- removes or claims, with the claims counts their triggers keep (subscription order); the
-- replays' rows (replay order); the ordering groups' advisory locks (key order); the stats rows
-- (subscription order); the backlog and archive shards, last. cebroker_append took the group
-- locks and then a backlog shard while cebroker_complete took a backlog shard and then the group
-- locks, and the two could deadlock; the completion now follows the order above.
ALTER TABLE pipeline_seen ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE pipeline_seen DROP CONSTRAINT pipeline_seen_pkey, ADD PRIMARY KEY (tenant, source, id);
DROP FUNCTION cebroker_append(double precision, double precision, bigint[], text[], text[], text[], int[],
    text[], text[], boolean, double precision, bigint);
CREATE FUNCTION cebroker_append(p_now double precision, p_horizon double precision, p_versions bigint[],
        p_tenants text[], p_sources text[], p_ids text[], p_bodies text[], p_items int[], p_subs text[], p_groups text[],
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
    -- them again); of the others, the first of each (tenant, source, id) is fresh if this statement
    -- wrote its key (also against another instance: the second writer waits, then finds it).
    SELECT version INTO v_latest FROM subscription_version;
    WITH items AS MATERIALIZED (
        SELECT u.item::int, u.tenant, u.source, u.id, u.body
        FROM unnest(p_versions, p_tenants, p_sources, p_ids, p_bodies) WITH ORDINALITY
            AS u (version, tenant, source, id, body, item)
        WHERE u.version IS NULL OR u.version >= v_latest),
    firsts AS MATERIALIZED (
        SELECT DISTINCT ON (i.tenant, i.source, i.id) i.item, i.tenant, i.source, i.id FROM items i
        ORDER BY i.tenant, i.source, i.id, i.item),
    fresh AS (
        INSERT INTO pipeline_seen AS s (tenant, source, id, at)
        SELECT f.tenant, f.source, f.id, p_now FROM firsts f ORDER BY f.tenant, f.source, f.id
        ON CONFLICT (tenant, source, id) DO UPDATE SET at = excluded.at WHERE s.at < p_horizon
        RETURNING s.tenant, s.source, s.id),
    kept AS MATERIALIZED (
        SELECT f.item FROM firsts f
        JOIN fresh k ON k.tenant = f.tenant AND k.source = f.source AND k.id = f.id),
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
CREATE OR REPLACE FUNCTION cebroker_complete(p_ids bigint[], p_now double precision, p_held double precision)
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
    -- In the lock order: replays' rows (in replay order), the ordering groups, the stats rows,
    -- the backlog shard.
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
    -- an event kept for the retention stays; the others go with their last delivery
    DELETE FROM pipeline_events e WHERE e.seq = ANY(v_seqs) AND NOT e.archived
        AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries d WHERE d.event_seq = e.seq);
    INSERT INTO pipeline_stats AS s (subscription, delivered)
        SELECT t.sub, count(*) FROM unnest(v_subs) AS t (sub) GROUP BY t.sub ORDER BY t.sub
        ON CONFLICT (subscription) DO UPDATE SET delivered = s.delivered + excluded.delivered;
    UPDATE pipeline_backlog SET pending = pending - cardinality(v_seqs) WHERE shard = pg_backend_pid() % 64;
    RETURN cardinality(v_seqs);
END $$;
