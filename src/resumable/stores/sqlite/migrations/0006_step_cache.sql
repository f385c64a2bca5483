-- resumable schema 6 (SQLite): the step cache's index (`@step(cache=...)`,
-- stores/step_cache.py). A key names the journal row holding its value; the
-- value is never stored here. expires_at_ms NULL: the entry never expires.
CREATE TABLE resumable_step_cache (
    key           TEXT PRIMARY KEY,
    step          TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER
) WITHOUT ROWID;
CREATE INDEX resumable_step_cache_step ON resumable_step_cache (step, workflow);
