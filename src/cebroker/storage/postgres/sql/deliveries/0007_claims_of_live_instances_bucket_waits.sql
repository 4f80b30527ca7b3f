-- Claims: two changes to the functions of step 5, which are otherwise as they were.
--
-- A claim is made only for an instance that is registered: cebroker_claim_many as in step 5,
-- except that it first takes a key-share lock on the owner's broker_instances row and claims
-- nothing if there is none. A claim sent under an id just before the instance gave that id up
-- (it took a new one after the database came back) used to commit after the hand-over had
-- freed the old id's claims: its rows then kept an owner that no instance would ever free,
-- and their deliveries waited for good. Now the removal of an instance's row waits for the
-- claims under way with its id, and a claim that comes after it finds no row. The removals
-- (the hand-over and the reaping) delete the row before they free its claims, so the claims
-- that went first are freed too. The lock does not conflict with the heartbeat's update.
CREATE OR REPLACE FUNCTION cebroker_claim_many(p_subs text[], p_owner text, p_now double precision,
        p_limits int[], p_concurrency int[], p_rates double precision[])
    RETURNS TABLE (subscription text, id bigint, event_seq bigint, attempts int, first_at double precision,
                   body text, replay text, trace text, next_due double precision, wait double precision)
    LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    -- bookkeeping, whose loss can only repeat work: its commit does not wait for the flush
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM broker_instances b WHERE b.id = p_owner FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- in subscription order, as every statement that locks claims rows: no deadlock
    FOR i IN SELECT g FROM generate_subscripts(p_subs, 1) AS g ORDER BY p_subs[g] LOOP
        RETURN QUERY SELECT p_subs[i], c.* FROM cebroker_claim(p_subs[i], p_owner, p_now, p_limits[i],
            p_concurrency[i], p_rates[i]) AS c;
    END LOOP;
END $$;

-- A claim's wait (the seconds until the subscription's token bucket holds a token again) is
-- given whenever the bucket is left empty, also by a claim that took its last token: the
-- broker then asks again when the bucket refills, and neither claims nor tells the other
-- instances of the subscription before (cebroker.storage.postgres.claims).
CREATE OR REPLACE FUNCTION cebroker_claim(p_sub text, p_owner text, p_now double precision, p_limit int,
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
