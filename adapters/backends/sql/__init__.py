"""The SQL both databases run (SQLite and PostgreSQL), each statement built once per dialect:
the views' (`views_*`), the history index (`history`) and the kept idempotency keys
(`idempotency`)."""
