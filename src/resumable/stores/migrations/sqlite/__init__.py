"""SQLite migrations: NNNN_name.sql, applied in order."""
