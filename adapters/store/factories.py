"""The store's infrastructure factories: the library's, with the hash chain and the data keys.

Each backend's factory makes the application recorder that writes the hash chain in the same
transaction as the events (`adapters.store.chain`) and gives the mapper the data keys of the same
database (`adapters.store.keys`), wrapped by CHATRECORD_MASTER_KEY where it is set
(`adapters.store.crypto`). `adapters.store.settings` names them in PERSISTENCE_MODULE (its own SQLite
factory takes `SealedFactory` as a base).
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Mapper, Transcoder
from eventsourcing.popo import POPOFactory as LibraryPOPOFactory
from psycopg.sql import SQL, Identifier

from adapters.store.chain import CHAIN_TABLE, ChainedPOPORecorder, ChainedPostgresRecorder, ChainedSQLiteRecorder
from adapters.store.crypto import MASTER_KEY_VARIABLE, master_key
from adapters.store.keys import KEYS_TABLE, DataKeys, MemoryDataKeys, PostgresDataKeys, SQLiteDataKeys
from adapters.store.history import TABLES as HISTORY_TABLES
from adapters.store.history import create_statements as history_statements
from adapters.store.postgres import PostgresFactory as StorePostgresFactory
from adapters.store.serialization import PydanticMapper


class SealedFactory:
    """Mixin for a library infrastructure factory: `mapper()` gets this backend's data keys
    (`data_keys`, made once per factory)."""

    env: Any
    _data_keys: DataKeys | None = None

    def mapper(self, transcoder: Transcoder | None = None, mapper_class: type[Mapper[Any]] | None = None) -> Mapper[Any]:
        mapper = super().mapper(transcoder, mapper_class)  # type: ignore[misc]
        if isinstance(mapper, PydanticMapper):
            mapper.keys = self.data_keys()
        return mapper

    def data_keys(self) -> DataKeys:
        """Returns the data keys of this factory's database. Raises BadMasterKey for a
        CHATRECORD_MASTER_KEY that is not base64 of 32 bytes."""
        if self._data_keys is None:
            self._data_keys = self.construct_data_keys(master_key(self.env.get(MASTER_KEY_VARIABLE)))
        return self._data_keys

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        raise NotImplementedError


class SealedSQLiteFactory(SealedFactory):
    """The SQLite part: chained recorder, keys in the same file."""

    application_recorder_class = ChainedSQLiteRecorder
    datastore: Any

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return SQLiteDataKeys(self.datastore, master, create_table=self.env_create_table())  # type: ignore[attr-defined]


class PostgresFactory(SealedFactory, StorePostgresFactory):
    """The store's PostgreSQL persistence (`adapters.store.postgres`: schema once, no pipeline mode,
    timeouts) with the chain, the data keys and the history index in the store's schema, all
    created once with the library's tables."""

    application_recorder_class = ChainedPostgresRecorder

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return PostgresDataKeys(self.datastore, master, create_table=False)  # made with the schema

    def _ready(self, recorder: Any) -> Any:
        if isinstance(recorder, ChainedPostgresRecorder):
            schema = self.datastore.schema
            recorder.sql_create_statements.extend([
                SQL("CREATE TABLE IF NOT EXISTS {}.{} (conversation uuid PRIMARY KEY, wrapped_key bytea, "
                    "erased_at timestamptz)").format(Identifier(schema), Identifier(KEYS_TABLE)),
                *(SQL(statement) for statement in history_statements(schema)),
            ])
            recorder.extra_tables = (CHAIN_TABLE, KEYS_TABLE, *HISTORY_TABLES)
        return super()._ready(recorder)


class POPOFactory(SealedFactory, LibraryPOPOFactory):
    """The library's in-memory persistence with the chain and the keys in memory."""

    def application_recorder(self) -> ChainedPOPORecorder:
        return ChainedPOPORecorder()

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return MemoryDataKeys(master)


POSTGRES_MODULE = "adapters.store.factories:PostgresFactory"
MEMORY_MODULE = "adapters.store.factories:POPOFactory"
