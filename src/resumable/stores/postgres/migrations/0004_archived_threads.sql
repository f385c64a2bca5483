-- resumable schema 4 (PostgreSQL): the stub left for a thread whose older snapshots
-- and the chunks only they named moved to one object in an object store
-- (`resumable archive`, stores/coldthreads.py). newest: JSON array of
-- [namespace, newest archived checkpoint_id]; refers_to: JSON array of the other
-- objects its records name.
CREATE TABLE {schema}.resumable_archived_threads (
    thread_id      TEXT COLLATE "C" PRIMARY KEY,
    object_key     TEXT NOT NULL,
    size           BIGINT NOT NULL,
    snapshots      BIGINT NOT NULL,
    chunks         BIGINT NOT NULL,
    archived_at_ms BIGINT NOT NULL,
    newest         TEXT NOT NULL,
    refers_to      TEXT NOT NULL
);
