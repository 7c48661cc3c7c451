"""The store's backends, one module each: `sqlite`, `postgres` and `memory`; `sql` holds what
the two SQL backends run alike, `settings` picks a backend from the environment.

Each module holds its backend's infrastructure factory, a subclass of the library's factory of
the same backend, which is what the library's PERSISTENCE_MODULE selects (`SQLITE_MODULE`,
`POSTGRES_MODULE`, `MEMORY_MODULE`; `adapters.backends.settings` names one). The factory makes the
application recorder that writes the hash chain in the events' own transaction
(`adapters.store.chain`) and builds the mapper with the data keys of the same database
(`adapters.store.keys`, on the backend's `DataKeyStore`), wrapped by CHATRECORD_MASTER_KEY where
it is set (`adapters.store.crypto`); it implements the store's ports (`adapters.store.ports`):
the history index (`history_index`) and the kept idempotency keys (`idempotency_keys`), which
`adapters.bootstrap` hands to the store (`ports`), and the views' tables (`view_storage`); and it
says what only the backend knows: the line that
describes its database (`describe`), why its server refuses a connection (`server_reason`),
which of its driver's errors is a lost connection, which a write tries again
(`connection_lost`, handed to the store with its ports), and which a setting or another
process caused (`problem`), so the
store's settings ask the backend instead of switching on its type (`backend_named`,
`backend_of_error`). The backend-neutral logic stays with its concern
(`adapters.store.chain.ChainedRecorder`, `adapters.backends.sql.history.SQLHistoryTables`,
`adapters.backends.sql.views_storage.SQLViewStorage`, `adapters.backends.sql.idempotency.SQLIdempotencyKeys`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from eventsourcing.persistence import InfrastructureFactory, Mapper, Transcoder
from eventsourcing.utils import resolve_topic

from adapters.store.crypto import MASTER_KEY_VARIABLE, master_key
from adapters.store.keys import DataKeys
from adapters.store.ports import HistoryIndex, IdempotencyKeys, StorePorts
from adapters.store.reproductions import ReproductionRows
from adapters.store.serialization import PydanticMapper

if TYPE_CHECKING:
    from adapters.store.crypto import ViewTexts
    from adapters.views.ports import ViewStorage


def one_line(message: str) -> str:
    """Returns a driver's message of several lines as one: each line's spaces folded, a line that
    ends without punctuation closed by `.` when the next begins a sentence (an upper-case
    letter) and by `;` otherwise, so psycopg's "Connection refused" and "Is the server
    running …?" read as two sentences, not one."""
    lines = [" ".join(line.split()) for line in message.splitlines() if line.strip()]  # runs of spaces as one
    out = ""
    for line in lines:
        if out:
            out += " " if out[-1] in ".;:,!?" else (". " if line[0].isupper() else "; ")
        out += line
    return out


SQLITE_MODULE = "adapters.backends.sqlite:SQLiteFactory"
POSTGRES_MODULE = "adapters.backends.postgres:PostgresFactory"
MEMORY_MODULE = "adapters.backends.memory:MemoryFactory"

LIBRARY_MODULES = {
    "eventsourcing.sqlite": SQLITE_MODULE,
    "eventsourcing.postgres": POSTGRES_MODULE,
    "eventsourcing.popo": MEMORY_MODULE,
}
"""The store's factory for each of the library's own persistence modules."""


class StoreFactory:
    """Mixin for a library infrastructure factory: `mapper()` gets this backend's data keys
    (`data_keys`, made once per factory), and the class methods hand out the backend's pieces
    of a store (a ConversationStore) on this backend's database. They are class methods, and
    read the database from the store's recorder, so a store on one of the library's own
    factories gets them too (`backend_of`)."""

    env: Any
    _data_keys: DataKeys | None = None
    read_only: bool = False
    """Whether the database is opened read-only (a SQLite file a reading command cannot write)."""
    created: Sequence[str] = ()
    """What this factory created (a file, tables); empty when the store existed already."""
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """The database driver's errors, which `problem` words (`adapters.backends.settings.store_problem`)."""

    def mapper(self, transcoder: Transcoder | None = None, mapper_class: type[Mapper[Any]] | None = None) -> Mapper[Any]:
        """The library's mapper; a PydanticMapper (the store's, `MAPPER_TOPIC`) is built with this
        factory's data keys."""
        if mapper_class is None and self.env.get(InfrastructureFactory.MAPPER_TOPIC):
            mapper_class = resolve_topic(self.env.get(InfrastructureFactory.MAPPER_TOPIC))
        if isinstance(mapper_class, type) and issubclass(mapper_class, PydanticMapper):
            factory: Any = self  # a mixin: the library's factory, with its codecs, comes after it
            return mapper_class(transcoder or factory.transcoder(), factory.compressor(), factory.cipher(), keys=self.data_keys())
        made: Mapper[Any] = super().mapper(transcoder, mapper_class)  # type: ignore[misc]  # the library's factory comes after it
        return made

    def data_keys(self) -> DataKeys:
        """Returns the data keys of this factory's database. Raises BadMasterKey for a
        CHATRECORD_MASTER_KEY that is not base64 of 32 bytes."""
        if self._data_keys is None:
            self._data_keys = self.construct_data_keys(master_key(self.env.get(MASTER_KEY_VARIABLE)))
        return self._data_keys

    def upkeep_warning(self) -> str | None:
        """Returns what the database's settings warn of for the store's upkeep (PostgreSQL:
        autovacuum off), None when nothing; `chatrecord init` and `serve` print it once."""
        return None

    @abstractmethod
    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        """Returns the data keys of this factory's database, wrapped by `master` where given."""

    @classmethod
    @abstractmethod
    def history_index(cls, recorder: Any) -> HistoryIndex:
        """Returns the history index in the database of `recorder` (the store's application
        recorder), its tables not yet created."""

    @classmethod
    @abstractmethod
    def idempotency_keys(cls, recorder: Any) -> IdempotencyKeys:
        """Returns the kept idempotency keys in the database of `recorder`, their table not yet
        created (`IdempotencyKeys.create`)."""

    @classmethod
    @abstractmethod
    def reproduction_rows(cls, recorder: Any) -> ReproductionRows:
        """Returns the reproductions' streams in the database of `recorder`, their table not yet
        created (`ReproductionRows.create`; `adapters.store.reproductions`)."""

    @classmethod
    def ports(cls, recorder: Any) -> StorePorts:
        """Returns this backend's implementations of the store's ports on the database of
        `recorder`, and its wording of a lost connection (`adapters.bootstrap` hands them to the
        store)."""
        return StorePorts(
            history=cls.history_index(recorder),
            idempotency_keys=cls.idempotency_keys(recorder),
            connection_lost=cls.connection_lost,
        )

    @classmethod
    def connection_lost(cls, error: BaseException) -> bool:
        """Says whether `error` (the library's, with the driver's as its cause) is the connection
        to this backend's server failing, refused or broken off, which a write tries again
        (`adapters.store.write_retry.reconnecting`); never for a backend with no server."""
        return False

    @classmethod
    @abstractmethod
    def view_storage(cls, recorder: Any, texts: ViewTexts | None) -> ViewStorage:
        """Returns where the read models live in the database of `recorder` (the store's
        application recorder; `adapters.backends.sql.views_storage`), sealing the transcript rows'
        texts with `texts` (None: kept plain). `adapters.bootstrap` hands it to the read models."""

    @classmethod
    @abstractmethod
    def describe(cls, env: Mapping[str, str]) -> str:
        """Returns one line naming the database of `env` (the library's keys), never the password."""

    @classmethod
    def server_reason(cls, env: Mapping[str, str]) -> str | None:
        """Returns, in one line, why the database server of `env` refuses a connection; None when
        it connects or the backend has no server."""
        return None

    @classmethod
    def problem(cls, driver: BaseException, env: Mapping[str, str], text: str, backend: str) -> str | None:
        """Returns the one line for the driver's error `driver` (its message `text`) when a
        setting or another process caused it, naming the setting and what to do (`backend`
        describes the store); None for any other error, which is a bug."""
        return None


def backend_of(factory: InfrastructureFactory[Any]) -> type[StoreFactory]:
    """Returns the store factory class that hands out the pieces of the database `factory`
    opened: `factory`'s own class, or for one of the library's own factories (a test or a
    benchmark naming `eventsourcing.sqlite` in PERSISTENCE_MODULE: no chain, no data keys)
    the store's factory of the same backend. Raises LookupError for any other factory."""
    if isinstance(factory, StoreFactory):
        return type(factory)
    topic = LIBRARY_MODULES.get(type(factory).__module__)
    if topic is None:
        raise LookupError(f"the store has no backend for the persistence module of {type(factory).__qualname__}")
    found: type[Any] = resolve_topic(topic)
    assert issubclass(found, StoreFactory)
    return found


def backend_named(module: str | None) -> type[StoreFactory]:
    """Returns the store factory class a PERSISTENCE_MODULE value names (one of the library's
    own modules, or a store factory's topic); the memory backend's for none or any other."""
    topic = LIBRARY_MODULES.get(module or "", module or MEMORY_MODULE)
    found: type[Any] = resolve_topic(topic if topic in LIBRARY_MODULES.values() else MEMORY_MODULE)
    assert issubclass(found, StoreFactory)
    return found


def backend_of_error(driver: BaseException) -> type[StoreFactory]:
    """Returns the store factory class whose database driver raised `driver` (StoreFactory
    itself, which words no error, for an error of no backend's driver)."""
    for topic in LIBRARY_MODULES.values():
        found: type[StoreFactory] = resolve_topic(topic)  # each names a StoreFactory subclass
        if isinstance(driver, found.driver_errors):
            return found
    return StoreFactory


def driver_errors() -> tuple[type[BaseException], ...]:
    """Returns the errors of every backend's database driver."""
    return tuple(error for topic in LIBRARY_MODULES.values() for error in resolve_topic(topic).driver_errors)
