-- Claims of several subscriptions together (docs/performance.md, PostgreSQL, instances on one
-- database).
--
-- cebroker_claim_many: the subscriptions of a call without a rate limit (the common case) are
-- claimed together, in three statements whatever their number, instead of one call of
-- cebroker_claim each (seven statements, and a function call's start and end, a subscription:
-- with several instances each claims a few deliveries of many subscriptions, and those fixed
-- costs were most of a claim's). The claims rows are locked first, in subscription order; the
-- statements after that see every claim committed before (a statement's snapshot is taken when
-- it starts), and no claim of these subscriptions can commit until this one does. A call with
-- a rate limit goes through cebroker_claim, subscription by subscription, as before. Its
-- plans walk indexes only: the planner expects thousands of picked rows (a LIMIT it cannot
-- read is a tenth of the rows), and would hash the whole delivery and event tables to join the
-- few dozen claimed ones.
CREATE OR REPLACE FUNCTION cebroker_claim_many(p_subs text[], p_owner text, p_now double precision,
        p_limits int[], p_concurrency int[], p_rates double precision[])
    RETURNS TABLE (subscription text, id bigint, event_seq bigint, attempts int, first_at double precision,
                   body text, replay text, trace text, next_due double precision, wait double precision)
    LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
    i int;
BEGIN
    -- bookkeeping, whose loss can only repeat work: its commit does not wait for the flush
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM broker_instances b WHERE b.id = p_owner FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rates) AS r WHERE r IS NOT NULL) THEN
        -- in subscription order, as every statement that locks claims rows: no deadlock
        FOR i IN SELECT g FROM generate_subscripts(p_subs, 1) AS g ORDER BY p_subs[g] LOOP
            RETURN QUERY SELECT p_subs[i], c.* FROM cebroker_claim(p_subs[i], p_owner, p_now, p_limits[i],
                p_concurrency[i], p_rates[i]) AS c;
        END LOOP;
        RETURN;
    END IF;
    INSERT INTO pipeline_claims (subscription, held)
        SELECT s, 0 FROM unnest(p_subs) AS s
        WHERE NOT EXISTS (SELECT 1 FROM pipeline_claims c WHERE c.subscription = s)
        ORDER BY s ON CONFLICT DO NOTHING;
    PERFORM 1 FROM pipeline_claims c WHERE c.subscription = ANY(p_subs) ORDER BY c.subscription FOR UPDATE;
    RETURN QUERY
    WITH room AS (
        SELECT a.sub, CASE WHEN a.conc IS NULL THEN a.lim
            ELSE least(a.lim, a.conc - (c.held - coalesce(
                (SELECT sum(f.n) FROM pipeline_claims_freed f WHERE f.subscription = a.sub), 0)))
            END AS n
        FROM unnest(p_subs, p_limits, p_concurrency) AS a (sub, lim, conc)
        JOIN pipeline_claims c ON c.subscription = a.sub),
    picked AS (
        SELECT p.id FROM room r CROSS JOIN LATERAL (
            SELECT d.id FROM pipeline_deliveries d
            WHERE d.subscription = r.sub AND d.owner IS NULL AND d.next_at <= p_now
            ORDER BY d.next_at, d.id LIMIT greatest(r.n, 0) FOR UPDATE SKIP LOCKED) AS p
        WHERE r.n > 0),
    claimed AS (
        UPDATE pipeline_deliveries d SET owner = p_owner FROM picked WHERE d.id = picked.id
        RETURNING d.subscription, d.id, d.event_seq, d.attempts, d.first_at, d.next_at, d.replay)
    SELECT c.subscription, c.id, c.event_seq, c.attempts, c.first_at, e.body, c.replay, e.trace,
        NULL::double precision, 0.0::double precision
    FROM claimed c JOIN pipeline_events e ON e.seq = c.event_seq ORDER BY c.subscription, c.next_at, c.id;
    -- then one row a subscription: when its earliest unclaimed delivery is due
    RETURN QUERY SELECT s, NULL::bigint, NULL::bigint, NULL::int, NULL::double precision, NULL::text,
        NULL::text, NULL::text,
        (SELECT d.next_at FROM pipeline_deliveries d WHERE d.subscription = s AND d.owner IS NULL
            ORDER BY d.next_at LIMIT 1),
        0.0::double precision
    FROM unnest(p_subs) AS s;
END $$;
