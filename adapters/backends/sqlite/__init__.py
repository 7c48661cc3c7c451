"""The SQLite backend: the store in one file (the embedded default).

- `SQLiteFactory`, the library's SQLite persistence with a `WaitingSQLiteDatastore` (a writing
  transaction takes the file's write lock when it begins), the hash chain
  (`ChainedSQLiteRecorder`) and the data keys in the same file (`SQLiteDataKeys`);
- its pieces of the store: the history index (`adapters.backends.sql.history.SQLHistoryTables`), the
  views' tables (`SQLiteViewStorage`) and the kept idempotency keys (`adapters.backends.sql.idempotency.SQLIdempotencyKeys`).

The package, one module per job (`PERSISTENCE_MODULE` names `adapters.backends.sqlite:SQLiteFactory`):
`chained_recorder`, `data_keys`, `waiting_datastore` (writers in turn, transactions IMMEDIATE),
`view_tables`, `store_file` (a foreign file refused, a read-only file opened read-only) and `factory`.
"""

from adapters.backends.sqlite.chained_recorder import ChainedSQLiteRecorder
from adapters.backends.sqlite.data_keys import SQLiteDataKeys
from adapters.backends.sqlite.factory import SQLiteFactory
from adapters.backends.sqlite.store_file import OWN_PREFIXES, OWN_TABLES, ForeignDatabase, read_only_uri, refuse_foreign
from adapters.backends.sqlite.view_tables import SQLiteViewStorage
from adapters.backends.sqlite.waiting_datastore import WaitingSQLiteDatastore

__all__ = [
    "OWN_PREFIXES",
    "OWN_TABLES",
    "ChainedSQLiteRecorder",
    "ForeignDatabase",
    "SQLiteViewStorage",
    "SQLiteDataKeys",
    "SQLiteFactory",
    "WaitingSQLiteDatastore",
    "read_only_uri",
    "refuse_foreign",
]
