"""The application recorder (`EventRecorder`): appends that end, and reads retried only when the connection
failed. An append of at most `PIPELINE_BYTES` is one call of the append function, or else the library's
pipelined statements. A larger one goes in one ordinary transaction. A large batch sends one document per
conversation."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Final, Literal, TypeVar, cast
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing import postgres as es_postgres
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.utils import retry
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier
from psycopg_pool import PoolTimeout

from adapters.backends.postgres.append import (
    APPEND_FUNCTION,
    ASSUMPTION_FAILED,
    AppendDocument,
    Unfit,
    append_function_statement,
    generation_function_name,
    generation_function_statement,
)
from adapters.backends.postgres.schema import create_once, schema_lock_name, views_lock_id
from adapters.store.chain import ChainBroken, InlineWrites
from adapters.store.ports import AssumptionFailed
from adapters.store.serialization import originator_uuid

T = TypeVar("T")

PIPELINE_BYTES = 256 * 1024
"""An append whose events' states hold at most this many bytes goes through psycopg's pipeline
mode (as the library's own recorder does); a larger one through an ordinary transaction."""
BATCH_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A batch of lines (`ConversationStore.handle_batch`, which saves with `InlineWrites(batch=True)`) whose events'
states hold more than PIPELINE_BYTES, up to this many, still goes as append documents, one
statement each (`_append_in_one_call` uses no pipeline mode); a larger one as `_append_plain`."""


CONNECTION_ATTEMPTS = 5
"""Tries of a write whose connection failed (not of one that timed out)."""


class _Answered(Exception):  # a carrier, never seen outside EventRecorder
    """Carries an append's error that is not to be tried again past the library's `retry`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_SELECT_EVENTS: Callable[..., Sequence[StoredEvent]] = es_postgres.PostgresAggregateRecorder.select_events.__wrapped__
_SELECT_NOTIFICATIONS: Callable[..., Sequence[Notification]] = (
    es_postgres.PostgresApplicationRecorder.select_notifications.__wrapped__
)
_MAX_NOTIFICATION_ID: Callable[..., int | None] = es_postgres.PostgresApplicationRecorder.max_notification_id.__wrapped__
"""The library's reads without its `retry`, which tries ten times whatever the error."""


class Sealing(threading.local):
    """The chain heads of this thread's transaction, until it commits (a chained recorder's)."""

    heads: dict[UUID, tuple[int, bytes]] | None = None


def _sqlstate(error: BaseException | None) -> str | None:
    """Returns the SQLSTATE of a psycopg error, None for another error or none."""
    return error.sqlstate if isinstance(error, psycopg.Error) else None


class _Again(Enum):
    AGAIN = "again"


_AGAIN: Final = _Again.AGAIN
"""What `EventRecorder._append_in_one_call` returns when the append is to be done synced."""


class EventRecorder(es_postgres.PostgresApplicationRecorder, ABC):
    """The library's application recorder, appending in one ordinary transaction instead of pipeline mode.
    Reads are retried only when the connection failed (`_read_retried`). What an append writes is each
    subclass's (`write_first`, `write_events`, `_committed`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sealing: Sealing | None = None
        """The chain heads of each thread's transaction, where the recorder keeps a chain."""
        self._function: str | None = None
        """`APPEND_FUNCTION`'s qualified name once made, "" where it cannot be, None before."""
        self._generations_ready: set[int | None] = set()
        """The generations whose append function (`generation_function_statement`) this
        process made or found."""
        self._views_lock = views_lock_id(self.datastore.schema)

    def select_events(self, originator_id: Any, **kwargs: Any) -> Sequence[StoredEvent]:
        """The library's read of a conversation's events, retried only when the connection failed. A lock or
        statement timeout is raised at once."""
        return self._read(_SELECT_EVENTS, originator_id, **kwargs)

    def select_notifications(self, *args: Any, **kwargs: Any) -> Any:
        """The library's read of the notification log, tried again as `select_events` is."""
        return self._read(_SELECT_NOTIFICATIONS, *args, **kwargs)

    def select_notifications_to_fold(
        self, start: int, limit: int, stop: int | None, part: tuple[int, int] | None = None
    ) -> Sequence[Notification]:
        """Returns the notifications after `start` (up to `stop`), at most `limit`, in order: what a rebuild
        folds. They come in PostgreSQL's binary format. With `part` (part, parts), only that part's
        conversations (`rebuild.part_of`), chosen by the server. Raises ValueError unless 0 <= part <
        parts. Retried as `select_events`."""
        which, params = SQL(""), [start, stop if stop is not None else 2**63 - 1]
        if part is not None:
            if not 0 <= part[0] < part[1]:
                raise ValueError(f"part {part[0]} of {part[1]}")
            which = SQL(" AND get_byte(uuid_send(originator_id), 15) %% %s = %s")
            params += [part[1], part[0]]
        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {}.{} "
            "WHERE notification_id > %s AND notification_id <= %s{} "
            "ORDER BY notification_id LIMIT %s"
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name), which)
        params.append(limit)

        def read(recorder: EventRecorder) -> list[Notification]:
            with recorder.datastore.get_connection() as conn, conn.cursor(binary=True, row_factory=tuple_row) as curs:
                curs.execute(statement, params, prepare=True)
                return [
                    Notification(id=n, originator_id=cid, originator_version=version, topic=topic, state=state)
                    for n, cid, version, topic, state in curs.fetchall()
                ]

        return self._read(read)

    def count_notifications_by_part(self, stop: int, parts: int) -> list[int]:
        """Returns how many notifications up to `stop` each of `parts` parts holds, in part order. One
        statement scanning the events table. Retried as `select_events`."""
        statement = SQL(
            "SELECT get_byte(uuid_send(originator_id), 15) %% %s AS part, count(*) AS n FROM {}.{} "
            "WHERE notification_id <= %s GROUP BY 1"
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name))

        def read(recorder: EventRecorder) -> list[int]:
            with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
                counted: dict[int, int] = dict(curs.execute(statement, (parts, stop)).fetchall())
            return [counted.get(part, 0) for part in range(parts)]

        return self._read(read)

    def max_notification_id(self) -> int | None:
        """The library's read of the newest notification id (a health check), retried as `select_events`. A
        pool that timed out is not waited for again."""
        return self._read(_MAX_NOTIFICATION_ID)

    def _read(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return cast(T, self._read_retried(read, *args, **kwargs))  # read's answer (the library's retry is untyped)
        except _Answered as answered:
            raise answered.error from answered.error.__cause__

    @retry((InterfaceError, OperationalError), max_attempts=CONNECTION_ATTEMPTS, wait=0.2)
    def _read_retried(self, read: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, *args, **kwargs)
        except (InterfaceError, OperationalError) as error:
            cause = error.__cause__
            if isinstance(cause, PoolTimeout) or _sqlstate(cause):
                raise _Answered(error) from error
            raise

    # ------------------------------------------------------------ appends

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Appends `stored_events` under the events table's write lock; returns their notification ids.
        Retried (`_append_retried`) only when the connection fails. Raises the library's IntegrityError
        for a taken version or a deadlock. Raises OperationalError on a lock or statement timeout. Raises
        AssumptionFailed when the index is not as assumed (`ASSUMPTION_FAILED`). Nothing is stored then."""
        try:
            ids: Sequence[int] | None = self._append_retried(stored_events, **kwargs)  # the library's retry is untyped
            return ids
        except _Answered as answered:
            if isinstance(answered.error.__cause__, psycopg.errors.DeadlockDetected):
                raise IntegrityError(f"the append deadlocked with another writer's: {answered.error}") from answered.error
            raise answered.error from answered.error.__cause__
        except PersistenceError as error:
            if _sqlstate(error.__cause__) == ASSUMPTION_FAILED:  # the append's check
                raise AssumptionFailed("the conversation's index is not as the command assumed") from None
            if isinstance(error.__cause__, psycopg.errors.DeadlockDetected):
                raise IntegrityError(f"the append deadlocked with another writer's: {error}") from error
            raise

    @retry((InterfaceError, OperationalError), max_attempts=CONNECTION_ATTEMPTS, wait=0.2)
    def _append_retried(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """`_append`, retried by the library's `retry` when the connection failed. A server answer or a pool
        wait goes out as `_Answered`, which `retry` lets through."""
        try:
            return self._append(stored_events, **kwargs)
        except (InterfaceError, OperationalError) as error:
            cause = error.__cause__
            if isinstance(cause, PoolTimeout) or _sqlstate(cause):
                raise _Answered(error) from error
            raise

    def _append(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if not stored_events:
            return None
        size = sum(len(e.state) for e in stored_events)
        if (inline := InlineWrites.given(kwargs)) is not None and inline.batch and PIPELINE_BYTES < size <= BATCH_DOCUMENT_BYTES:
            ids = self._append_in_one_call(stored_events, **kwargs)  # not pipelined: one statement per document
            if ids is _AGAIN:
                ids = self._append_plain(stored_events, **kwargs)
        elif size > PIPELINE_BYTES:
            ids = self._append_plain(stored_events, **kwargs)
        else:
            ids = self._append_pipelined(stored_events, **kwargs)
        self._committed(stored_events)
        return ids

    def _append_plain(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self.write_first(curs, stored_events, **kwargs)
            self.write_events(curs, stored_events, **kwargs)  # lock, NOTIFY, INSERT
            return self.inserted_ids(curs)

    def _append_pipelined(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Appends in one statement (`_append_in_one_call`). Where that cannot carry it, or failed not for
        the events' own reason, appends as the library does (`_append_synced`)."""
        ids = self._append_in_one_call(stored_events, **kwargs)
        if ids is _AGAIN:
            return self._append_synced(stored_events, **kwargs)
        return ids

    def _append_function(self) -> str | None:
        """Returns the schema-qualified name of `APPEND_FUNCTION`, made once where missing. None where it
        cannot be made; appends then go as statements."""
        name = self._function
        if name is None:
            schema = self.datastore.schema
            name = f'"{schema}".{APPEND_FUNCTION}'
            exists = SQL("SELECT to_regprocedure({}) IS NOT NULL").format(f"{name}(jsonb)")
            try:
                with self.datastore.get_connection() as conn:
                    create_once(
                        conn, schema_lock_name(schema), exists, [append_function_statement(schema, self.events_table_name)]
                    )
            except (psycopg.Error, PersistenceError):
                name = ""
            self._function = name
        return name or None

    def _generation_function(self, conn: psycopg.Connection[Any], generation: int) -> str | None:
        """Returns the schema-qualified name of `generation`'s append function, made once where missing.
        None where it cannot be made."""
        schema = self.datastore.schema
        name = f'"{schema}".{generation_function_name(generation)}'
        ready = self._generations_ready
        if generation in ready:
            return name
        exists = SQL("SELECT to_regprocedure({}) IS NOT NULL").format(f"{name}(jsonb)")
        try:
            create_once(
                conn,
                schema_lock_name(schema),
                exists,
                [generation_function_statement(schema, self.events_table_name, generation)],
            )
        except psycopg.Error:
            return None
        ready.add(generation)
        return name

    def _append_in_one_call(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None | Literal[_Again.AGAIN]:
        """Sends the whole append as one call of `APPEND_FUNCTION` (or the generation's) with an
        `AppendDocument`.

        Returns the notification ids, or `_AGAIN` when the document cannot carry it or it failed not for
        the events' own reason. Raises a taken version, a failed assumption, a timeout and a lost
        connection as they are. A batch of several conversations sends one document per conversation, in
        one transaction."""
        function = self._append_function()
        if function is None:
            return _AGAIN
        groups: list[list[StoredEvent]] = []
        for event in stored_events:
            if groups and groups[-1][0].originator_id == event.originator_id:
                groups[-1].append(event)
            else:
                groups.append([event])
        if len({str(group[0].originator_id) for group in groups}) != len(groups):
            return _AGAIN  # a conversation's events apart: as statements
        with self.datastore.get_connection() as conn:
            tried: list[int | None] = []  # the views' generation of each document called
            try:
                if len(groups) == 1:
                    return self._call_document(conn, function, stored_events, None, tried, **kwargs)
                ids: list[int] = []
                heads: dict[UUID, tuple[int, bytes]] = {}
                sealing = self._sealing  # a chained recorder's heads of each document
                with conn.transaction():
                    # every conversation's index row first, in id order, before a document takes the
                    # events table's lock: a writer of one of them is waited for, never waits on this
                    with conn.cursor() as curs:
                        curs.execute(
                            SQL("SELECT cid FROM {}.chatrecord_index WHERE cid = ANY(%s) ORDER BY cid FOR UPDATE").format(
                                Identifier(self.datastore.schema)
                            ),
                            (sorted(str(group[0].originator_id) for group in groups),),
                        )
                        # then the views' lock, shared, before a document reads the view tables: taken
                        # after those reads, it deadlocked with a rebuild's switch waiting to drop them
                        curs.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self._views_lock,))
                    for group in groups:
                        cid = originator_uuid(group[0].originator_id)
                        ids.extend(self._call_document(conn, function, group, cid, tried, **kwargs))
                        heads.update((sealing.heads if sealing is not None else None) or {})
                if sealing is not None:
                    sealing.heads = heads
                return ids
            except Unfit:
                return _AGAIN
            except Exception as error:
                if isinstance(error, psycopg.errors.UndefinedFunction) and tried:
                    self._generations_ready.discard(tried[-1])  # dropped meanwhile: made again next time
                if self._events_own(error):
                    raise
                return _AGAIN

    def _call_document(
        self,
        conn: psycopg.Connection[Any],
        function: str,
        stored_events: Sequence[StoredEvent],
        conversation: UUID | None,
        tried: list[int | None],
        **kwargs: Any,
    ) -> list[int]:
        """Gathers one conversation's append into an `AppendDocument` and calls its function; returns the
        notification ids. Appends the document's views generation (None: none) to `tried` first. Raises
        Unfit, or the server's error."""
        document = AppendDocument(conn, str(stored_events[0].originator_id), self._views_lock)
        document.conversation = conversation
        # the document stands in for the transaction's cursor: it gathers the writes as data
        self.write_first(document, stored_events, **kwargs)
        self.write_events(document, stored_events, **kwargs)
        views = document.doc.get("views")
        generation = views["g"] if views is not None else None
        tried.append(generation)
        if generation is not None:
            named = self._generation_function(conn, generation)
            if named is None:
                raise Unfit("no append function of the views' generation")
            function = named
        return document.call(function)

    def _events_own(self, error: Exception) -> bool:
        """Says whether an append's `error` is the events' own: a taken version, a timeout, a lost
        connection."""
        if isinstance(error, ChainBroken):
            return True  # the previous event has no hash row: refused, whichever way it is sent
        if not isinstance(error, psycopg.Error):
            return False  # a view's fold raised: the synced append catches it at the savepoint
        if error.sqlstate is None or error.sqlstate in ("55P03", "57014", ASSUMPTION_FAILED):
            return True  # lock_not_available, query_canceled, an assumption failed
        return isinstance(error, psycopg.IntegrityError) and error.diag.table_name == self.events_table_name

    def _append_synced(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's pipelined append, synced at the views' savepoint and before COMMIT. A taken version
        raises IntegrityError there. Unlike the library's, a failed insert step rolls back before
        raising."""
        failure: Exception | None = None
        ids: Sequence[int] | None = None
        with self.datastore.get_connection() as conn:
            with conn.pipeline() as pipeline, conn.transaction():
                with conn.cursor() as curs:
                    self.write_first(curs, stored_events, **kwargs)
                with conn.cursor() as curs:
                    try:
                        self.write_events(curs, stored_events, **kwargs)
                        pipeline.sync()  # a taken version raises IntegrityError here, not at COMMIT
                        ids = self.inserted_ids(curs)
                    except Exception as error:  # noqa: BLE001 - any error is raised once the pipeline has closed
                        failure = error
                if failure is not None:
                    raise psycopg.Rollback  # ends this transaction with ROLLBACK, not COMMIT
            if failure is not None:
                raise failure
        return ids

    @abstractmethod
    def write_first(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Writes what goes before `stored_events` in the append's transaction (`curs` or `AppendDocument`).
        An error rolls the events back too."""

    @abstractmethod
    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Writes `stored_events` in the append's transaction (`curs` or `AppendDocument`); `inserted_ids`
        reads their ids. Raises Unfit where they cannot go into a document."""

    @staticmethod
    def inserted_ids(curs: Any) -> list[int]:
        """Returns the notification ids the insert of `write_events` returned on `curs`."""
        return [row["notification_id"] for row in curs.fetchall()]

    @abstractmethod
    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Called once the transaction that stored `stored_events` has committed."""

    def write_as_statements(self, curs: Any, stored_events: Sequence[StoredEvent]) -> None:
        """Takes the events table's write lock, sends the library's NOTIFY and inserts `stored_events` on
        `curs`, as the library's recorder does."""
        for statement in self.lock_table_statements:
            curs.execute(statement)
        curs.execute(SQL("NOTIFY {}").format(Identifier(self.channel_name)))
        events = [self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events]
        curs.execute(self.insert_events_statement, (events,))


class PlainEventRecorder(EventRecorder):
    """`EventRecorder` without the hash chain; its events go as statements. Every store on PostgreSQL writes
    with `ChainedPostgresRecorder`."""

    def write_first(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Nothing goes before the events."""

    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """The events as statements (`write_as_statements`). Raises Unfit for an `AppendDocument`."""
        if isinstance(curs, AppendDocument):
            raise Unfit("the plain recorder's events go as statements")
        self.write_as_statements(curs, stored_events)

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Nothing is kept."""
