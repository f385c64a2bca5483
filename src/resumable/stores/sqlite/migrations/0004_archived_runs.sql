-- resumable schema 4 (SQLite): the stub left for a finished run whose journal and
-- inputs moved to one object in an object store (`resumable archive`,
-- stores/coldruns.py). refers_to: JSON array of the other objects its records name.
CREATE TABLE resumable_archived_runs (
    run_id         TEXT PRIMARY KEY,
    object_key     TEXT NOT NULL,
    size           INTEGER NOT NULL,
    steps          INTEGER NOT NULL,
    inputs         INTEGER NOT NULL,
    fence          INTEGER NOT NULL,
    archived_at_ms INTEGER NOT NULL,
    refers_to      TEXT NOT NULL
) WITHOUT ROWID;
