"""The store's factory (`SQLiteFactory`) and the texts that say what a driver's error means."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from typing import Any

from eventsourcing import sqlite as es_sqlite
from eventsourcing.utils import strtobool

from adapters.backends import StoreFactory
from adapters.backends.sql import reproductions
from adapters.backends.sql.dialect import SQLITE
from adapters.backends.sql.history import SQLHistoryTables
from adapters.backends.sql.idempotency import SQLIdempotencyKeys, create_statements
from adapters.backends.sqlite.chained_recorder import ChainedSQLiteRecorder
from adapters.backends.sqlite.data_keys import SQLiteDataKeys
from adapters.backends.sqlite.store_file import read_only_uri, refuse_foreign
from adapters.backends.sqlite.view_tables import SQLiteViewStorage
from adapters.backends.sqlite.waiting_datastore import WaitingSQLiteDatastore
from adapters.store.chain import CHAIN_TABLE, ChainedRecorder
from adapters.store.crypto import ViewTexts
from adapters.store.keys import DataKeys

# SQLite result codes (the primary code, the low byte) a setting or another process causes
_SQLITE_LOCKED = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED"}
_SQLITE_NOT_A_DATABASE = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
_SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file: a file that starts with them and cannot be read is damaged."""
_SQLITE_CANNOT_USE = {
    3: "SQLITE_PERM",
    8: "SQLITE_READONLY",
    10: "SQLITE_IOERR",
    13: "SQLITE_FULL",
    14: "SQLITE_CANTOPEN",
    23: "SQLITE_AUTH",
}


class SQLiteFactory(StoreFactory, es_sqlite.SQLiteFactory):
    """The library's SQLite persistence with a `WaitingSQLiteDatastore`, the hash chain and the data
    keys. It hands out the file's history index, views and idempotency keys."""

    application_recorder_class = ChainedSQLiteRecorder
    driver_errors = (sqlite3.Error,)

    SQLITE_READING = "SQLITE_READING"
    """`y`: the store is opened for a command that only reads (`adapters.bootstrap.open_store`):
    a file this process cannot write (its permissions, or a read-only file system) is opened
    read-only (`read_only_uri`) instead of failing on the first write the open would try."""

    def __init__(self, env: Any) -> None:
        name = env.get(self.SQLITE_DBNAME) or ""
        fresh = not os.path.exists(name)
        if not fresh:
            refuse_foreign(name)
        uri = read_only_uri(name) if strtobool(env.get(self.SQLITE_READING) or "n") and not fresh else None
        self.read_only = uri is not None
        """Whether the file is opened read-only (a reading command on a file it cannot write)."""
        super().__init__(env)
        self.created: list[str] = [name] if fresh else []
        """The file this factory created (empty when it existed already), as PostgresFactory's
        `created` lists the tables it created."""
        plain = self.datastore
        self.datastore = WaitingSQLiteDatastore(
            db_name=uri or plain.pool.db_name,
            lock_timeout=plain.pool.lock_timeout,
            single_row_tracking=plain.single_row_tracking,
            originator_id_type=plain.originator_id_type,
        )
        plain.close()

    def env_create_table(self) -> bool:
        return not self.read_only and super().env_create_table()  # nothing is created in a file read only

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return DataKeys(master, SQLiteDataKeys(self.datastore, create_table=self.env_create_table()))

    @classmethod
    def describe(cls, env: Mapping[str, str]) -> str:
        return f"SQLite file {env.get('SQLITE_DBNAME')}"

    @classmethod
    def problem(cls, driver: BaseException, env: Mapping[str, str], text: str, backend: str) -> str | None:
        path = env.get("SQLITE_DBNAME", "")
        code = (getattr(driver, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in _SQLITE_NOT_A_DATABASE and (code == 11 or _sqlite_header(path)):
            return (
                f"CHATRECORD_DB: the store file {path} is damaged ({text}); restore it from a backup "
                "(chatrecord does not repair a damaged store file)"
            )
        if code in _SQLITE_NOT_A_DATABASE:
            return (
                f"CHATRECORD_DB: {path} is not a SQLite database ({text}); point CHATRECORD_DB at a "
                "chatrecord store, or at a file that does not exist yet to start a new one"
            )
        if code in _SQLITE_LOCKED:
            waited = env.get("SQLITE_LOCK_TIMEOUT") or es_sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT
            return f"the {backend} stayed locked by another process for {waited} s ({text}); try again when its write has ended"
        if code in _SQLITE_CANNOT_USE and os.path.isdir(path):
            return (
                f"CHATRECORD_DB: {path} is a folder, not a file; point CHATRECORD_DB at a store file "
                f"in it (such as {os.path.join(path, 'chatrecord.sqlite')}), or at a file that does not exist yet"
            )
        if code in _SQLITE_CANNOT_USE:
            return (
                f"the {backend} cannot be used ({text}); check CHATRECORD_DB: its folder must exist "
                "and the file must be readable and writable"
            )
        return None

    @classmethod
    def history_index(cls, recorder: Any) -> SQLHistoryTables:
        # the chain's hash is read with the index only where the recorder keeps each
        # conversation's newest hash to compare it with (`ChainedRecorder.chain_heads`)
        chained = isinstance(recorder, ChainedRecorder) and recorder.chain_heads is not None
        return SQLHistoryTables(recorder.datastore, SQLITE, chain=(CHAIN_TABLE, recorder._id) if chained else None)

    @classmethod
    def view_storage(cls, recorder: Any, texts: ViewTexts | None) -> SQLiteViewStorage:
        return SQLiteViewStorage(recorder.datastore, recorder.events_table_name, texts=texts)

    @classmethod
    def idempotency_keys(cls, recorder: Any) -> SQLIdempotencyKeys:
        return SQLIdempotencyKeys(recorder.datastore, SQLITE, create_statements(SQLITE))

    @classmethod
    def reproduction_rows(cls, recorder: Any) -> reproductions.SQLReproductionRows:
        return reproductions.SQLReproductionRows(recorder.datastore, SQLITE, reproductions.create_statements(SQLITE))


def _sqlite_header(path: str) -> bool:
    """Says whether the file at `path` starts as a SQLite database does (False when it cannot be read)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False
