-- Freeing a claim no longer waits for the claims of its subscription (docs/performance.md,
-- PostgreSQL, instances).
--
-- Until step 9 a subscription's pipeline_claims row held the count of its claimed deliveries,
-- and every statement that changed it locked that row until its commit: the claims of every
-- instance (FOR UPDATE, so that they take turns), and the triggers of every completion, retry
-- and dead letter, which took one from it. With several instances, every completion waited for
-- the claims under way on its subscriptions, and every claim for the completions: their
-- transactions ran one after another across all instances.
--
-- Now the row counts only what was claimed (claims still take turns on it), and what is freed
-- is counted apart, in pipeline_claims_freed, one row per subscription and shard (the freeing
-- backend's pid modulo 16, as the backlog is kept): a completion locks only its shard's row,
-- which no claim locks. A claim reads the claimed count under its lock, less the sum of the
-- freed counts committed before its statement: a release still under way is not subtracted
-- yet, so the count is at most too high for that moment (a claim may take fewer), never too
-- low (the concurrency is never exceeded). Both are running totals (bigint); the view
-- pipeline_claims_held gives the count of claimed deliveries per subscription.
ALTER TABLE pipeline_claims ALTER COLUMN held TYPE bigint;
CREATE TABLE pipeline_claims_freed (subscription text NOT NULL, shard int NOT NULL, n bigint NOT NULL,
    PRIMARY KEY (subscription, shard));
CREATE VIEW pipeline_claims_held AS
    SELECT c.subscription, c.held - coalesce(sum(f.n), 0) AS held
    FROM pipeline_claims c LEFT JOIN pipeline_claims_freed f ON f.subscription = c.subscription
    GROUP BY c.subscription, c.held;
CREATE OR REPLACE FUNCTION cebroker_count_claims() RETURNS trigger LANGUAGE plpgsql AS $$
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
        IF r.delta > 0 THEN
            INSERT INTO pipeline_claims AS p (subscription, held) VALUES (r.subscription, r.delta)
            ON CONFLICT (subscription) DO UPDATE SET held = p.held + r.delta;
        ELSE
            INSERT INTO pipeline_claims_freed AS f (subscription, shard, n)
            VALUES (r.subscription, pg_backend_pid() % 16, -r.delta)
            ON CONFLICT (subscription, shard) DO UPDATE SET n = f.n - r.delta;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION cebroker_count_claims_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT o.subscription, count(*)::int AS n FROM old_rows o WHERE o.owner IS NOT NULL
        GROUP BY o.subscription ORDER BY o.subscription
    LOOP
        INSERT INTO pipeline_claims_freed AS f (subscription, shard, n)
        VALUES (r.subscription, pg_backend_pid() % 16, r.n)
        ON CONFLICT (subscription, shard) DO UPDATE SET n = f.n + r.n;
    END LOOP;
    RETURN NULL;
END $$;
-- cebroker_claim as in step 7, but for its count of claimed deliveries
CREATE OR REPLACE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
        p_concurrency int, p_rate double precision)
    RETURNS TABLE (id bigint, event_seq bigint, attempts int, first_at double precision, body text,
                   replay text, trace text, next_due double precision, wait double precision)
    LANGUAGE plpgsql SET enable_bitmapscan = off AS $$
#variable_conflict use_column
DECLARE
    v_n int := p_limit;
    v_held bigint;
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
    -- less the claims freed since (their releases are counted apart, in the freeing backend's
    -- shard: a release committed after this statement began is not seen, so the count can only
    -- be too high, never too low)
    v_held := v_held - coalesce((SELECT sum(f.n) FROM pipeline_claims_freed f WHERE f.subscription = p_sub), 0);
    IF p_concurrency IS NOT NULL THEN
        v_n := least(v_n, p_concurrency - v_held);
    END IF;
    IF p_rate IS NOT NULL THEN
        v_tokens := cebroker_refill('subscription ' || p_sub, p_rate, p_now);
        v_n := least(v_n, floor(v_tokens)::int);
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
    -- The wait until the bucket holds a token again, after this claim's (step 5 gave it only
    -- when the claim found the bucket empty, so a claim that took the last token was followed
    -- by one that could claim nothing).
    IF p_rate IS NOT NULL AND v_tokens - v_got < 1.0 THEN
        v_wait := (1.0 - (v_tokens - v_got)) / p_rate;
    END IF;
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::int, NULL::double precision, NULL::text,
        NULL::text, NULL::text,
        (SELECT d.next_at FROM pipeline_deliveries d WHERE d.subscription = p_sub AND d.owner IS NULL
            ORDER BY d.next_at LIMIT 1),
        v_wait;
END $$;
