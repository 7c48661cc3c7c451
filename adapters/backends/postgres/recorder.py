"""The application recorder (`EventRecorder`): appends that end, and the library's reads of events
and notifications and a rebuild's reads in parts, tried again only when the connection failed,
not when the server answered or the pool waited.

An append of at most `PIPELINE_BYTES` goes as one statement, a call of the append function
(`adapters.backends.postgres.append`), or, when it cannot, as the library's pipelined statements; a
larger one in one ordinary transaction; a large batch as one document per conversation.
"""

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
    """The library's application recorder, appending in one ordinary transaction instead of
    psycopg's pipeline mode (see the package's docstring, `adapters.backends.postgres`), its
    reads tried again only when the connection failed (`_read_retried`). What an append writes
    is each recorder's (`write_first`, `write_events`, `_committed`): `PlainEventRecorder`'s
    the events alone, `ChainedPostgresRecorder`'s with the hash chain."""

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
        """The library's read of a conversation's events, tried again only when the connection
        failed (`_read_retried`): a lock or statement timeout the server answered (a table
        locked by DDL, VACUUM FULL) is raised at once, not after ten waits."""
        return self._read(_SELECT_EVENTS, originator_id, **kwargs)

    def select_notifications(self, *args: Any, **kwargs: Any) -> Any:
        """The library's read of the notification log, tried again as `select_events` is."""
        return self._read(_SELECT_NOTIFICATIONS, *args, **kwargs)

    def select_notifications_to_fold(
        self, start: int, limit: int, stop: int | None, part: tuple[int, int] | None = None
    ) -> Sequence[Notification]:
        """Returns, as `select_notifications(start, limit, stop, inclusive_of_start=False)`
        does, the notifications after `start` (up to `stop`), at most `limit`, in order: what a
        rebuild folds. They come in PostgreSQL's binary format (a state's bytes as they are,
        not as hex text to be decoded: the read costs half as much). With `part` (part, parts)
        only the conversations of that part (`adapters.views.rebuild.part_of`: the last byte
        of the conversation's UUID modulo `parts`), chosen by the server: a rebuild's worker
        process reads its own conversations' events only. Raises ValueError unless
        0 <= part < parts; tried again as `select_events` is."""
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
        """Returns how many of the notifications up to `stop` each of `parts` parts holds
        (`select_notifications_to_fold`'s parts), in part order: one statement, a scan of the
        events table, which a rebuild that would fold in parts asks first. Tried again as
        `select_events` is."""
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
        """The library's read of the newest notification's id (what a health check asks), tried
        again as `select_events` is: a pool that waited its timeout for a connection is not
        waited for nine times more (the library's own tries made a health check of a server
        that went away take 50 s)."""
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
        """Appends `stored_events` under the events table's write lock and returns their
        notification ids; tries again (`_append_retried`) when the connection fails, never
        after the server answered or the pool waited.

        Raises the library's IntegrityError when a version is taken already or the append
        deadlocked with another writer's (the server chose it to roll back: written again, it
        goes through), OperationalError when the lock or the statement timed out,
        AssumptionFailed when the index is not as the writer assumed (the server raised
        `ASSUMPTION_FAILED`: the append function's check, or `PostgresHistoryTables._append_write`'s);
        nothing is stored then.
        """
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
        """`_append`, tried again by the library's `retry` when the connection failed; an error
        the server answered (a timeout, a refusal) or a pool that waited already goes out as
        `_Answered`, which `retry` lets through."""
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
        """Appends in one statement (`_append_in_one_call`); when the append holds what that
        cannot carry, or failed for a reason that is not the events' own, appends as the
        library does (`_append_synced`), so that a failing view statement rolls back to its
        savepoint and the events are still stored."""
        ids = self._append_in_one_call(stored_events, **kwargs)
        if ids is _AGAIN:
            return self._append_synced(stored_events, **kwargs)
        return ids

    def _append_function(self) -> str | None:
        """Returns the schema-qualified name of `APPEND_FUNCTION`, creating it once where it is
        missing (a store an earlier version made); None where it cannot be had (a read-only
        database, a role without CREATE): appends then go as statements."""
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
        """Returns the schema-qualified name of generation `generation`'s append function,
        creating it once (`generation_function_statement`) where it is missing; None where it
        cannot be made."""
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
        """Sends the whole append as one statement, a call of `APPEND_FUNCTION` (of the
        generation's function where it holds view rows) with the writes gathered as data
        (`AppendDocument`); returns the notification ids, or `_AGAIN` when the
        append holds what the document cannot carry, or failed for a reason that is not the
        events' own (the append then runs synced, `_append_synced`). Raises a taken
        version, a failed assumption, a timeout and a lost connection as they are.

        An append of several conversations' events (a batch, `ConversationStore.handle_batch`;
        each conversation's events together, in order) sends one document per conversation, in
        one transaction: each document's `conversation` names the conversation whose index and
        view rows the writer's `inline(cursor)` writes into it."""
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
                    # the index rows of every conversation first, in the order of their ids (as the
                    # groups are, `ConversationStore.handle_batch`), before the first document takes the
                    # events table's lock: a writer of one of them (its index row, then that lock) is
                    # waited for, never waited for while this holds the lock it waits for
                    with conn.cursor() as curs:
                        curs.execute(
                            SQL("SELECT cid FROM {}.chatrecord_index WHERE cid = ANY(%s) ORDER BY cid FOR UPDATE").format(
                                Identifier(self.datastore.schema)
                            ),
                            (sorted(str(group[0].originator_id) for group in groups),),
                        )
                        # then the views' lock, shared, as each document's function takes it: before
                        # a document's reads of the view tables (its head, its rows), which in this
                        # transaction hold those tables to its end. Asked for after them, it waited
                        # for a rebuild's switch (the lock held exclusively) that waited to drop them
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
        """Gathers one conversation's append into an `AppendDocument` and calls its function;
        returns the notification ids. `conversation`: the document's (a part of a batch), which
        the writer's `inline(cursor)` writes alone. Appends to `tried` the generation of the
        document's views (None: none) before it is called. Raises Unfit, or the server's error."""
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
        """Says whether `error` of an append in one round trip is the events' own (then the
        synced append would meet it again): a taken version, a timeout, a lost connection."""
        if isinstance(error, ChainBroken):
            return True  # the previous event has no hash row: refused, whichever way it is sent
        if not isinstance(error, psycopg.Error):
            return False  # a view's fold raised: the synced append catches it at the savepoint
        if error.sqlstate is None or error.sqlstate in ("55P03", "57014", ASSUMPTION_FAILED):
            return True  # lock_not_available, query_canceled, an assumption failed
        return isinstance(error, psycopg.IntegrityError) and error.diag.table_name == self.events_table_name

    def _append_synced(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's own pipelined append: the writes before the insert go out without
        waiting for each answer; the views' savepoint is synced before it is released, and the
        insert before the COMMIT, so a taken version raises IntegrityError there. Unlike the
        library's, a failed insert step rolls the transaction back before its error is raised:
        committed, a refusal raised in Python (`ChainBroken`) stored what it refused."""
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
        """Writes, in the append's transaction (`curs`, or the `AppendDocument` that stands in
        for it), what goes before `stored_events` (a chained recorder's: the writer's rows). An
        error rolls the events back with it."""

    @abstractmethod
    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Writes `stored_events` in the append's transaction (`curs`, or the `AppendDocument`
        that stands in for it), their notification ids then read by `inserted_ids`. Raises Unfit
        where they cannot go into a document."""

    @staticmethod
    def inserted_ids(curs: Any) -> list[int]:
        """Returns the notification ids the insert of `write_events` returned on `curs`."""
        return [row["notification_id"] for row in curs.fetchall()]

    @abstractmethod
    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Called once the transaction that stored `stored_events` has committed."""

    def write_as_statements(self, curs: Any, stored_events: Sequence[StoredEvent]) -> None:
        """Takes the events table's write lock, sends the library's NOTIFY and inserts
        `stored_events` (returning their notification ids, `inserted_ids`) on `curs`, as the
        library's recorder does, with its statements (`lock_table_statements`, `channel_name`,
        `insert_events_statement`)."""
        for statement in self.lock_table_statements:
            curs.execute(statement)
        curs.execute(SQL("NOTIFY {}").format(Identifier(self.channel_name)))
        events = [self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events]
        curs.execute(self.insert_events_statement, (events,))


class PlainEventRecorder(EventRecorder):
    """`EventRecorder` without the hash chain: its events go as statements (the library's
    APPLICATION_RECORDER_TOPIC may name it; every store on PostgreSQL writes with
    `ChainedPostgresRecorder`)."""

    def write_first(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Nothing goes before the events."""

    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """The events as statements (`write_as_statements`). Raises Unfit for an `AppendDocument`."""
        if isinstance(curs, AppendDocument):
            raise Unfit("the plain recorder's events go as statements")
        self.write_as_statements(curs, stored_events)

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Nothing is kept."""
