"""What the SQLite and the PostgreSQL backends run alike: the history index (`history`) and the
kept idempotency keys (`idempotency`), each statement built once per backend from its dialect
(`Dialect`: the placeholder and the tables' schema)."""
