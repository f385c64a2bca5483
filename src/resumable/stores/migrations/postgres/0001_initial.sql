-- resumable schema 1 (PostgreSQL). Applied by stores/postgres.py inside one transaction,
-- under an advisory lock, with {schema} replaced by the quoted schema name.
-- Keys are COLLATE "C": they compare byte by byte, as in every other store, whatever the
-- database's locale (checkpoint ids must sort as strings sort in Python).
CREATE TABLE {schema}.resumable_runs (
    run_id              TEXT COLLATE "C" PRIMARY KEY,
    workflow            TEXT NOT NULL,
    status              TEXT NOT NULL,
    input               BYTEA NOT NULL,
    output              BYTEA,
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL,
    parent_id           TEXT COLLATE "C",
    forked_from         TEXT COLLATE "C",
    fork_seq            INTEGER,
    queue               TEXT,
    lease_owner         TEXT,
    lease_expires_at_ms BIGINT NOT NULL DEFAULT 0,
    fence               BIGINT NOT NULL DEFAULT 0,
    wake_at_ms          BIGINT,
    expires_at_ms       BIGINT
);
CREATE INDEX resumable_runs_created ON {schema}.resumable_runs (created_at_ms, run_id);
CREATE INDEX resumable_runs_status ON {schema}.resumable_runs (status, updated_at_ms);
-- what claim_runs scans: only runs that have not finished
CREATE INDEX resumable_runs_pending ON {schema}.resumable_runs (created_at_ms, run_id)
    WHERE status IN ('queued', 'running', 'sleeping', 'waiting');
CREATE INDEX resumable_runs_queue ON {schema}.resumable_runs (queue, status) WHERE queue IS NOT NULL;
CREATE INDEX resumable_runs_parent ON {schema}.resumable_runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX resumable_runs_forked ON {schema}.resumable_runs (forked_from) WHERE forked_from IS NOT NULL;

CREATE TABLE {schema}.resumable_steps (
    run_id         TEXT COLLATE "C" NOT NULL,
    seq            INTEGER NOT NULL,
    name           TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    status         TEXT NOT NULL,
    output         BYTEA,
    attempts       INTEGER NOT NULL,
    started_at_ms  BIGINT NOT NULL,
    finished_at_ms BIGINT NOT NULL,
    usage          BYTEA,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE {schema}.resumable_inputs (
    run_id     TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      BYTEA NOT NULL,
    sent_at_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE {schema}.resumable_queue_starts (
    queue         TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL
);
CREATE INDEX resumable_queue_starts_queue ON {schema}.resumable_queue_starts (queue, started_at_ms);

CREATE TABLE {schema}.resumable_chunks (
    hash TEXT COLLATE "C" PRIMARY KEY,
    data BYTEA NOT NULL
);

CREATE TABLE {schema}.resumable_snapshots (
    thread_id     TEXT COLLATE "C" NOT NULL,
    namespace     TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    parent_id     TEXT COLLATE "C",
    manifest      BYTEA NOT NULL,
    label         TEXT,
    metadata      BYTEA,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (thread_id, namespace, checkpoint_id)
);

CREATE TABLE {schema}.resumable_snapshot_chunks (
    thread_id     TEXT COLLATE "C" NOT NULL,
    namespace     TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    hash          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (thread_id, namespace, checkpoint_id, hash)
);
CREATE INDEX resumable_snapshot_chunks_hash ON {schema}.resumable_snapshot_chunks (hash);
