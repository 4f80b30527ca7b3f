-- Single events, cheaper for the server (docs/performance.md, PostgreSQL, the seventh round).
--
-- cebroker_append_distinct is cebroker_append (step 8) for a call whose items' keys (tenant,
-- source, id) are all distinct and whose deliveries have no ordering group: the common case,
-- single events from concurrent publishers, which the caller tells apart (it sends the other
-- calls to cebroker_append, which stays, as do the instances of the release before this one).
-- Its statement has fewer parts for the server to start, run and end on every call: with the
-- keys distinct, the keys written are those of the items themselves (no DISTINCT ON and its
-- sort), the items kept are found by one join with the keys written, an item's event number is
-- drawn in that same step when it has a delivery (or is kept for the retention) instead of in a
-- further pair of subplans, and the deliveries join the items' numbers directly. The keys are
-- still written in their order (the lock order of concurrent appends), the events numbered in
-- the call's order and the deliveries in their items' order; the result is cebroker_append's.
CREATE FUNCTION cebroker_append_distinct(p_now double precision, p_horizon double precision, p_versions bigint[],
        p_tenants text[], p_sources text[], p_ids text[], p_bodies text[], p_traces text[], p_items int[],
        p_subs text[], p_keep boolean, p_boundary bigint)
    RETURNS TABLE (item int, seq bigint, delivery bigint, subscription text, latest bigint)
    -- planned for each call's arrays, as cebroker_append: a large batch's rows are not a small
    -- group's
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
    -- A small group runs the plans made once per connection (see cebroker_append, step 6).
    IF cardinality(p_ids) <= 32 AND cardinality(p_items) <= 64 THEN
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;
    -- Held (shared) until commit: a replay that must cover every event accepted before it
    -- waits for the appends in flight (cebroker.storage.archive).
    PERFORM pg_advisory_xact_lock_shared(p_boundary);
    -- Items matched against an older subscription version are left out (the caller matches
    -- them again); an item is fresh if this statement wrote its key (also against another
    -- instance: the second writer waits, then finds it).
    SELECT version INTO v_latest FROM subscription_version;
    WITH items AS MATERIALIZED (
        SELECT u.item::int, u.tenant, u.source, u.id, u.body, u.trace
        FROM unnest(p_versions, p_tenants, p_sources, p_ids, p_bodies, p_traces) WITH ORDINALITY
            AS u (version, tenant, source, id, body, trace, item)
        WHERE u.version IS NULL OR u.version >= v_latest),
    fresh AS (
        INSERT INTO pipeline_seen AS s (tenant, source, id, at)
        SELECT i.tenant, i.source, i.id, p_now FROM items i ORDER BY i.tenant, i.source, i.id
        ON CONFLICT (tenant, source, id) DO UPDATE SET at = excluded.at WHERE s.at < p_horizon
        RETURNING s.tenant, s.source, s.id),
    -- every fresh item; numbered (in the call's order: the number is drawn after the sort)
    -- when it has a delivery or is kept for the retention
    numbered AS MATERIALIZED (
        SELECT i.item, i.body, i.trace,
            CASE WHEN p_keep OR i.item = ANY (p_items) THEN nextval('pipeline_events_seq') END AS seq
        FROM items i JOIN fresh k ON k.tenant = i.tenant AND k.source = i.source AND k.id = i.id
        ORDER BY i.item),
    events AS (
        INSERT INTO pipeline_events (seq, body, received, archived, trace)
        SELECT n.seq, n.body, p_now, p_keep, n.trace FROM numbered n WHERE n.seq IS NOT NULL),
    deliveries AS MATERIALIZED (
        SELECT d.item, n.seq, d.sub, nextval('pipeline_deliveries_seq') AS id
        FROM unnest(p_items, p_subs) WITH ORDINALITY AS d (item, sub, n)
        JOIN numbered n ON n.item = d.item ORDER BY d.n),
    inserted AS (
        INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at)
        SELECT d.id, d.seq, d.sub, 0, p_now, p_now FROM deliveries d)
    SELECT array_agg(n.item ORDER BY n.item, d.id), array_agg(n.seq ORDER BY n.item, d.id),
        array_agg(d.id ORDER BY n.item, d.id), array_agg(d.sub ORDER BY n.item, d.id),
        (SELECT count(x.seq) FROM numbered x), (SELECT sum(octet_length(x.body)) FROM numbered x WHERE x.seq IS NOT NULL)
    INTO v_items, v_seqs, v_dids, v_dsubs, v_events, v_bytes
    FROM numbered n LEFT JOIN deliveries d ON d.item = n.item;
    -- The counters as in cebroker_append (a shard drawn once, in the same order).
    v_count := coalesce(cardinality(array_remove(v_dids, NULL)), 0);
    v_shard := floor(random() * 64)::int;
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
