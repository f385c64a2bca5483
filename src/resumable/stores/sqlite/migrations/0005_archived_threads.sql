-- resumable schema 5 (SQLite): the stub left for a thread whose older snapshots
-- and the chunks only they named moved to one object in an object store
-- (`resumable archive`, stores/coldthreads.py). newest: JSON array of
-- [namespace, newest archived checkpoint_id]; refers_to: JSON array of the other
-- objects its records name.
CREATE TABLE resumable_archived_threads (
    thread_id      TEXT PRIMARY KEY,
    object_key     TEXT NOT NULL,
    size           INTEGER NOT NULL,
    snapshots      INTEGER NOT NULL,
    chunks         INTEGER NOT NULL,
    archived_at_ms INTEGER NOT NULL,
    newest         TEXT NOT NULL,
    refers_to      TEXT NOT NULL
) WITHOUT ROWID;
