-- resumable schema 6 (PostgreSQL): schedules (`@workflow(schedule=)`,
-- `Engine.schedule`). The definition is what the declaring code last saved;
-- paused and last_tick_ms are the state every worker and the CLI share
-- (stores/postgres/schedules.py).
CREATE TABLE {schema}.resumable_schedules (
    name          TEXT COLLATE "C" PRIMARY KEY,
    workflow      TEXT NOT NULL,
    cron          TEXT NOT NULL,
    tz            TEXT NOT NULL,
    catch_up      INTEGER NOT NULL,
    paused        BOOLEAN NOT NULL DEFAULT FALSE,
    last_tick_ms  BIGINT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
