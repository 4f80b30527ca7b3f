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
