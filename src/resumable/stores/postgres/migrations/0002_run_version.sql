-- resumable schema 2 (PostgreSQL): the workflow version a run started on
-- (@workflow(version=)), so workers of two code versions can drain one store side by
-- side. NULL: no version (every run stored before this migration). Adding a nullable
-- column without a default rewrites no rows.
ALTER TABLE {schema}.resumable_runs ADD COLUMN version TEXT;
