-- The delivery log. owner: the instance that claimed the delivery (NULL: free).
-- pipeline_backlog keeps the count of deliveries in shards (one per connection, by backend pid),
-- so that counting is cheap and concurrent transactions do not queue on one counter row.
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
