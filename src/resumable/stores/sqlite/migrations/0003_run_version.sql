-- resumable schema 3 (SQLite): the workflow version a run started on (@workflow(version=)),
-- so workers of two code versions can drain one store side by side. NULL: no version
-- (every run stored before this migration).
ALTER TABLE resumable_runs ADD COLUMN version TEXT;
