-- resumable schema 9 (SQLite): the step cache's entries by source run, so that
-- deleting a run deletes the entries naming its rows in the same transaction.
CREATE INDEX resumable_step_cache_run ON resumable_step_cache (run_id);
