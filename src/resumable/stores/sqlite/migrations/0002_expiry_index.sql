-- resumable schema 2 (SQLite): retention finds expired runs without a scan.
CREATE INDEX resumable_runs_expires ON resumable_runs (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
