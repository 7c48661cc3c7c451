"""The SQL both databases run (SQLite and PostgreSQL), each statement built once per dialect:
the views' (`views_*`) and the store's."""
