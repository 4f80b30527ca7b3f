-- subscription_changes holds every change with its version; subscription_version is the one row
-- every subscription write locks, so versions are handed out, and committed, in order.
CREATE TABLE subscriptions (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id       text   NOT NULL UNIQUE,
    protocol text   NOT NULL,
    sink     text   NOT NULL,
    source   text,
    revision int    NOT NULL,
    doc      text   NOT NULL
);
CREATE INDEX subscriptions_protocol ON subscriptions (protocol, seq);
CREATE INDEX subscriptions_sink ON subscriptions (sink, seq);
CREATE INDEX subscriptions_source ON subscriptions (source, seq);
CREATE TABLE subscription_types (
    type text   NOT NULL,
    seq  bigint NOT NULL REFERENCES subscriptions (seq) ON DELETE CASCADE,
    PRIMARY KEY (type, seq)
);
CREATE INDEX subscription_types_seq ON subscription_types (seq);
CREATE TABLE subscription_version (one int PRIMARY KEY CHECK (one = 1), version bigint NOT NULL);
INSERT INTO subscription_version VALUES (1, 0);
CREATE TABLE subscription_changes (
    version  bigint PRIMARY KEY,
    kind     text   NOT NULL,
    id       text   NOT NULL,
    revision int    NOT NULL,
    doc      text   NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
