-- The trace context of each event (its publish span's ``traceparent``, then ``;tracestate`` if
-- any; NULL when not traced), kept with the event so that every delivery attempt, on any
-- instance and after any delay, joins its trace; a dead letter keeps it too, for the attempts
-- after a redrive. The append takes the events' contexts (NULL: none is traced) and the claims
-- return them: the three functions are defined again with the column, otherwise as in steps 2
-- (the claims) and 4 (the append).
ALTER TABLE pipeline_events ADD COLUMN trace text;
ALTER TABLE pipeline_deadletters ADD COLUMN trace text;
DROP FUNCTION cebroker_claim_many(text[], text, double precision, int[], int[], double precision[]);
DROP FUNCTION cebroker_claim(text, text, double precision, int, int, double precision);
DROP FUNCTION cebroker_append(double precision, double precision, bigint[], text[], text[], text[], text[],
    int[], text[], text[], boolean, double precision, bigint);
CREATE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
        p_concurrency int, p_rate double precision)
    RETURNS TABLE (id bigint, event_seq bigint, attempts int, first_at double precision, body text,
                   replay text, trace text, next_due double precision, wait double precision)
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
        SELECT c.id, c.event_seq, c.attempts, c.first_at, e.body, c.replay, e.trace,
            NULL::double precision, 0.0::double precision
        FROM claimed c JOIN pipeline_events e ON e.seq = c.event_seq ORDER BY c.next_at, c.id;
        GET DIAGNOSTICS v_got = ROW_COUNT;
    END IF;
    IF p_rate IS NOT NULL AND v_got > 0 THEN
        UPDATE pipeline_buckets SET tokens = v_tokens - v_got WHERE key = 'subscription ' || p_sub;
    END IF;
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::int, NULL::double precision, NULL::text,
        NULL::text, NULL::text,
        (SELECT d.next_at FROM pipeline_deliveries d WHERE d.subscription = p_sub AND d.owner IS NULL
            ORDER BY d.next_at LIMIT 1),
        v_wait;
END $$;
CREATE FUNCTION cebroker_claim_many(p_subs text[], p_owner text, p_now double precision, p_limits int[],
        p_concurrency int[], p_rates double precision[])
    RETURNS TABLE (subscription text, id bigint, event_seq bigint, attempts int, first_at double precision,
                   body text, replay text, trace text, next_due double precision, wait double precision)
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
