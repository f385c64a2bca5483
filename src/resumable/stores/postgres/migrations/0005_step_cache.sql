-- resumable schema 5 (PostgreSQL): the step cache's index (`@step(cache=...)`,
-- stores/step_cache.py). A key names the journal row holding its value; the
-- value is never stored here. expires_at_ms NULL: the entry never expires.
CREATE TABLE {schema}.resumable_step_cache (
    key           TEXT COLLATE "C" PRIMARY KEY,
    step          TEXT COLLATE "C" NOT NULL,
    workflow      TEXT COLLATE "C" NOT NULL,
    run_id        TEXT COLLATE "C" NOT NULL,
    seq           BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT
);
CREATE INDEX resumable_step_cache_step ON {schema}.resumable_step_cache (step, workflow);
