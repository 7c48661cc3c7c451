"""The SQLite backend: the store in one file (the embedded default).

- `SQLiteFactory`: the library's SQLite persistence with a `WaitingSQLiteDatastore`, the hash chain
  (`ChainedSQLiteRecorder`) and the data keys (`SQLiteDataKeys`), in one file;
- its pieces of the store: the history index (`SQLHistoryTables`), the views' tables
  (`SQLiteViewStorage`) and the idempotency keys (`SQLIdempotencyKeys`).

One module per job; `PERSISTENCE_MODULE` names `adapters.backends.sqlite:SQLiteFactory`."""

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
