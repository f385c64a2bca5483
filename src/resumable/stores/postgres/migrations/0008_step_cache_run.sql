-- resumable schema 8 (PostgreSQL): the step cache's entries by source run, so that
-- deleting a run deletes the entries naming its rows in the same transaction.
CREATE INDEX resumable_step_cache_run ON {schema}.resumable_step_cache (run_id);
