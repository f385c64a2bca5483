"""PostgreSQL migrations: NNNN_name.sql, applied in order, `{schema}` replaced by the store's schema."""
