-- resumable schema 8 (SQLite): run feeds (stores/feeds.py). A run's progress
-- events and its steps' streamed chunks, one append-only channel each, numbered
-- from 1 in append order; once_key makes an append idempotent (a replayed publish).
CREATE TABLE resumable_feed (
    run_id        TEXT NOT NULL,
    channel       TEXT NOT NULL,
    "offset"      INTEGER NOT NULL,
    once_key      TEXT,
    payload       BLOB NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, channel, "offset")
) WITHOUT ROWID;
CREATE UNIQUE INDEX resumable_feed_once_key
    ON resumable_feed (run_id, channel, once_key) WHERE once_key IS NOT NULL;
