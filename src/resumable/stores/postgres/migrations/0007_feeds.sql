-- resumable schema 7 (PostgreSQL): run feeds (stores/feeds.py). A run's progress
-- events and its steps' streamed chunks, one append-only channel each, numbered
-- from 1 in append order; once_key makes an append idempotent (a replayed publish).
CREATE TABLE {schema}.resumable_feed (
    run_id        TEXT COLLATE "C" NOT NULL,
    channel       TEXT COLLATE "C" NOT NULL,
    "offset"      BIGINT NOT NULL,
    once_key      TEXT COLLATE "C",
    payload       BYTEA NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, channel, "offset")
);
CREATE UNIQUE INDEX resumable_feed_once_key
    ON {schema}.resumable_feed (run_id, channel, once_key) WHERE once_key IS NOT NULL;
