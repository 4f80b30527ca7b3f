-- The append and the announcements, cheaper for the server (docs/performance.md, PostgreSQL).
--
-- cebroker_append as in step 6, except that a call without ordering groups (p_groups NULL, the
-- common case) runs a statement without the groups' parts: the plan of step 6's statement has
-- a CTE and two subplans for them, which every call initialized and ended whether or not any
-- delivery had a group; and the count of written deliveries is an expression, not a query.
--
-- cebroker_due_among names those of the given subscriptions whose earliest unclaimed delivery
-- is due (NULL: none), for the announcement an ingesting instance sends to the others
-- (cebroker.storage.postgres.ingest). Each subscription is probed on its own, in the order of its
-- due index, stopping at its earliest unclaimed delivery. The statement the instances sent
-- before (EXISTS of a due unclaimed delivery) was planned from the statistics of a queue, which
-- are as good as random: as a semi-join over a scan of the whole table, and written otherwise in
-- plain SQL, as a bitmap of every due delivery; with a backlog of 100,000 deliveries each
-- announcement cost about 10 ms of the server's CPU. The function's settings leave the walk of
-- the index the planner's only cheap choice.
CREATE OR REPLACE FUNCTION cebroker_append(p_now double precision, p_horizon double precision, p_versions bigint[],
        p_tenants text[], p_sources text[], p_ids text[], p_bodies text[], p_traces text[], p_items int[],
        p_subs text[], p_groups text[],
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
    -- A small group (single events from concurrent publishers) runs the plans made once per
    -- connection: planning the statement below for each call costs the server more than
    -- running it, and a small group's rows fit any plan. A larger one is planned for its arrays
    -- (the function's setting); the setting made here ends with the function.
    IF cardinality(p_ids) <= 32 AND cardinality(p_items) <= 64 THEN
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;
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
    IF p_groups IS NULL THEN
        WITH items AS MATERIALIZED (
            SELECT u.item::int, u.tenant, u.source, u.id, u.body, u.trace
            FROM unnest(p_versions, p_tenants, p_sources, p_ids, p_bodies, p_traces) WITH ORDINALITY
                AS u (version, tenant, source, id, body, trace, item)
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
            SELECT d.item, d.sub, d.n
            FROM unnest(p_items, p_subs) WITH ORDINALITY AS d (item, sub, n)
            JOIN kept k ON k.item = d.item),
        numbered AS MATERIALIZED (
            SELECT i.item, i.body, i.trace, nextval('pipeline_events_seq') AS seq FROM items i
            WHERE i.item IN (SELECT w.item FROM wanted w) OR (p_keep AND i.item IN (SELECT k.item FROM kept k))
            ORDER BY i.item),
        events AS (
            INSERT INTO pipeline_events (seq, body, received, archived, trace)
            SELECT n.seq, n.body, p_now, p_keep, n.trace FROM numbered n),
        deliveries AS MATERIALIZED (
            SELECT w.item, n.seq, w.sub, nextval('pipeline_deliveries_seq') AS id
            FROM wanted w JOIN numbered n ON n.item = w.item ORDER BY w.item, w.n),
        inserted AS (
            INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at)
            SELECT d.id, d.seq, d.sub, 0, p_now, p_now FROM deliveries d)
        SELECT array_agg(k.item ORDER BY k.item, d.id), array_agg(coalesce(d.seq, n.seq) ORDER BY k.item, d.id),
            array_agg(d.id ORDER BY k.item, d.id), array_agg(d.sub ORDER BY k.item, d.id),
            (SELECT count(*) FROM numbered), (SELECT sum(octet_length(x.body)) FROM numbered x)
        INTO v_items, v_seqs, v_dids, v_dsubs, v_events, v_bytes
        FROM kept k LEFT JOIN numbered n ON n.item = k.item LEFT JOIN deliveries d ON d.item = k.item;
    ELSE
        WITH items AS MATERIALIZED (
            SELECT u.item::int, u.tenant, u.source, u.id, u.body, u.trace
            FROM unnest(p_versions, p_tenants, p_sources, p_ids, p_bodies, p_traces) WITH ORDINALITY
                AS u (version, tenant, source, id, body, trace, item)
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
            SELECT i.item, i.body, i.trace, nextval('pipeline_events_seq') AS seq FROM items i
            WHERE i.item IN (SELECT w.item FROM wanted w) OR (p_keep AND i.item IN (SELECT k.item FROM kept k))
            ORDER BY i.item),
        events AS (
            INSERT INTO pipeline_events (seq, body, received, archived, trace)
            SELECT n.seq, n.body, p_now, p_keep, n.trace FROM numbered n),
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
    END IF;
    -- A shard picked at random: this transaction holds its row until its commit is flushed, and
    -- two instances' connections may share a backend pid modulo 64. No NOTIFY here: commits of
    -- notifying transactions take turns (the server serializes them), and this one waits for
    -- its flush; the caller announces the deliveries once it has committed.
    v_count := coalesce(cardinality(array_remove(v_dids, NULL)), 0);  -- an expression, not a query
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
CREATE FUNCTION cebroker_due_among(p_subs text[], p_now double precision) RETURNS text
    LANGUAGE sql STABLE SET enable_bitmapscan = off SET enable_sort = off AS $$
    SELECT string_agg(t.sub, ' ' ORDER BY t.sub) FROM unnest(p_subs) AS t (sub)
    WHERE (SELECT d.next_at FROM pipeline_deliveries d WHERE d.subscription = t.sub AND d.owner IS NULL
           ORDER BY d.next_at, d.id LIMIT 1) <= p_now
$$;
