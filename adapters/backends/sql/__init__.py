"""The SQL both databases run, each statement built once per dialect: the views' (`views_*`), the history
index (`history`) and the idempotency keys (`idempotency`)."""
