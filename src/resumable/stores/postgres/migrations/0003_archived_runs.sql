-- resumable schema 3 (PostgreSQL): the stub left for a finished run whose journal and
-- inputs moved to one object in an object store (`resumable archive`,
-- stores/coldruns.py). refers_to: JSON array of the other objects its records name.
CREATE TABLE {schema}.resumable_archived_runs (
    run_id         TEXT COLLATE "C" PRIMARY KEY,
    object_key     TEXT NOT NULL,
    size           BIGINT NOT NULL,
    steps          BIGINT NOT NULL,
    inputs         BIGINT NOT NULL,
    fence          BIGINT NOT NULL,
    archived_at_ms BIGINT NOT NULL,
    refers_to      TEXT NOT NULL
);
