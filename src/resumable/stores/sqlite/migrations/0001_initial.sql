-- resumable schema 1 (SQLite). Applied by stores/_sql.py inside one transaction.
CREATE TABLE resumable_runs (
    run_id              TEXT PRIMARY KEY,
    workflow            TEXT NOT NULL,
    status              TEXT NOT NULL,
    input               BLOB NOT NULL,
    output              BLOB,
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL,
    parent_id           TEXT,
    forked_from         TEXT,
    fork_seq            INTEGER,
    queue               TEXT,
    lease_owner         TEXT,
    lease_expires_at_ms INTEGER NOT NULL DEFAULT 0,
    fence               INTEGER NOT NULL DEFAULT 0,
    wake_at_ms          INTEGER,
    expires_at_ms       INTEGER
);
CREATE INDEX resumable_runs_created ON resumable_runs (created_at_ms);
CREATE INDEX resumable_runs_status ON resumable_runs (status, wake_at_ms);
CREATE INDEX resumable_runs_parent ON resumable_runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX resumable_runs_forked ON resumable_runs (forked_from) WHERE forked_from IS NOT NULL;

CREATE TABLE resumable_steps (
    run_id         TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    name           TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    status         TEXT NOT NULL,
    output         BLOB,
    attempts       INTEGER NOT NULL,
    started_at_ms  INTEGER NOT NULL,
    finished_at_ms INTEGER NOT NULL,
    usage          BLOB,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE resumable_inputs (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    sent_at_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE resumable_queue_starts (
    queue         TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL
);
CREATE INDEX resumable_queue_starts_queue ON resumable_queue_starts (queue, started_at_ms);

-- content-addressed chunks and the snapshots that name them; WITHOUT ROWID keeps
-- each key stored once (a rowid table would repeat it in its primary-key index)
CREATE TABLE resumable_chunks (
    hash TEXT PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE resumable_snapshots (
    thread_id     TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    parent_id     TEXT,
    manifest      BLOB NOT NULL,
    chunk_refs    TEXT NOT NULL,  -- JSON array of the chunk hashes the manifest names
    label         TEXT,
    metadata      BLOB,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (thread_id, namespace, checkpoint_id)
) WITHOUT ROWID;
