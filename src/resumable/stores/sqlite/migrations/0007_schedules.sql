-- resumable schema 7 (SQLite): schedules (`@workflow(schedule=)`, `Engine.schedule`).
-- The definition is what the declaring code last saved; paused and last_tick_ms
-- are the state every worker and the CLI share (stores/sqlite/schedules.py).
CREATE TABLE resumable_schedules (
    name          TEXT PRIMARY KEY,
    workflow      TEXT NOT NULL,
    cron          TEXT NOT NULL,
    tz            TEXT NOT NULL,
    catch_up      INTEGER NOT NULL,
    paused        INTEGER NOT NULL DEFAULT 0,
    last_tick_ms  INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
