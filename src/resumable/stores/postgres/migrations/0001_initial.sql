-- resumable schema 1 (PostgreSQL). Applied by stores/postgres/migrations as one script inside
-- one transaction, under an advisory lock, with {schema} replaced by the quoted schema.
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
    fork_seq            BIGINT,
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
-- retention finds expired runs without a scan
CREATE INDEX resumable_runs_expires ON {schema}.resumable_runs (expires_at_ms) WHERE expires_at_ms IS NOT NULL;

CREATE TABLE {schema}.resumable_steps (
    run_id         TEXT COLLATE "C" NOT NULL,
    seq            BIGINT NOT NULL,  -- ledger entries are negative, map items >= 2**62
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

-- One step commit, fenced: the FOR SHARE lock makes a concurrent lease change (fence + 1)
-- wait until this transaction ends, or, if that change committed first, re-reads the
-- row and finds the fence stale, so a stale writer never gets its record in. A function
-- because PL/pgSQL keeps its plans per connection, where a plain statement would be
-- planned afresh on every commit (no prepared statements: transaction-mode poolers).
CREATE FUNCTION {schema}.resumable_commit_step(
    p_run_id TEXT, p_seq BIGINT, p_name TEXT, p_fingerprint TEXT, p_status TEXT,
    p_output BYTEA, p_attempts INTEGER, p_started_at_ms BIGINT, p_finished_at_ms BIGINT,
    p_usage BYTEA, p_fence BIGINT
) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {schema}.resumable_runs
      WHERE run_id = p_run_id AND fence = p_fence FOR SHARE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    INSERT INTO {schema}.resumable_steps (run_id, seq, name, fingerprint, status, output,
        attempts, started_at_ms, finished_at_ms, usage)
    VALUES (p_run_id, p_seq, p_name, p_fingerprint, p_status, p_output, p_attempts,
        p_started_at_ms, p_finished_at_ms, p_usage)
    ON CONFLICT (run_id, seq) DO UPDATE
       SET name = EXCLUDED.name, fingerprint = EXCLUDED.fingerprint,
           status = EXCLUDED.status, output = EXCLUDED.output,
           attempts = EXCLUDED.attempts, started_at_ms = EXCLUDED.started_at_ms,
           finished_at_ms = EXCLUDED.finished_at_ms, usage = EXCLUDED.usage;
    RETURN TRUE;
END
$$;
