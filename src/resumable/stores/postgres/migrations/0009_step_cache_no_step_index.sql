-- resumable schema 9 (PostgreSQL): the step cache's (step, workflow) index goes.
-- `cache clear --step/--workflow` is a rare maintenance command, and every entry
-- written paid an insert into this index too; SQLite drops it in schema 10.
DROP INDEX {schema}.resumable_step_cache_step;
