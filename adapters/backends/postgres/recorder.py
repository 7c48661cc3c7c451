"""The application recorder (`EventRecorder`): appends that end; its reads, tried again only when the
connection failed, are `adapters.backends.postgres.recorder_reads.RecorderReads`'.

An append of at most `PIPELINE_BYTES` goes as one statement, a call of the append function
(`adapters.backends.postgres.append`), or, when it cannot, as the library's pipelined statements; a
larger one in one ordinary transaction; a large batch as one document per conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, Final, Literal
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.utils import retry
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
from adapters.backends.postgres.recorder_reads import CONNECTION_ATTEMPTS, RecorderReads, _Answered
from adapters.backends.postgres.schema import create_once, schema_lock_name, views_lock_id
from adapters.store.chain import ChainBroken
from adapters.store.ports import AssumptionFailed
from adapters.store.serialization import originator_uuid

PIPELINE_BYTES = 256 * 1024
"""An append whose events' states hold at most this many bytes goes through psycopg's pipeline
mode (as the library's own recorder does); a larger one through an ordinary transaction."""
BATCH_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A batch of lines (`ConversationStore.handle_batch`, which saves with `batch=True`) whose events'
states hold more than PIPELINE_BYTES, up to this many, still goes as append documents, one
statement each (`_append_in_one_call` uses no pipeline mode); a larger one as `_append_plain`."""


class _Again(Enum):
    AGAIN = "again"


_AGAIN: Final = _Again.AGAIN
"""What `EventRecorder._append_in_one_call` returns when the append is to be done synced."""


class EventRecorder(RecorderReads):
    """The library's application recorder, appending in one ordinary transaction instead of
    psycopg's pipeline mode (see the package's docstring, `adapters.backends.postgres`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._function: str | None = None
        """`APPEND_FUNCTION`'s qualified name once made, "" where it cannot be, None before."""
        self._generations_ready: set[int | None] = set()
        """The generations whose append function (`generation_function_statement`) this
        process made or found."""
        self._views_lock = views_lock_id(self.datastore.schema)

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
            if getattr(error.__cause__, "sqlstate", None) == ASSUMPTION_FAILED:  # the append's check
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
            if isinstance(cause, PoolTimeout) or getattr(cause, "sqlstate", None):
                raise _Answered(error) from error
            raise

    def _append(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if not stored_events:
            return None
        size = sum(len(e.state) for e in stored_events)
        if kwargs.get("batch") and PIPELINE_BYTES < size <= BATCH_DOCUMENT_BYTES:
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
            generation = None
            try:
                if len(groups) == 1:
                    return self._call_document(conn, function, stored_events, None, **kwargs)
                ids: list[int] = []
                heads: dict[UUID, tuple[int, bytes]] = {}
                sealing = getattr(self, "_sealing", None)  # a chained recorder's heads of each document
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
                        ids.extend(self._call_document(conn, function, group, originator_uuid(group[0].originator_id), **kwargs))
                        heads.update(getattr(sealing, "heads", None) or {})
                if sealing is not None:
                    sealing.heads = heads
                return ids
            except Unfit:
                return _AGAIN
            except Exception as error:
                generation = getattr(error, "generation", None)
                if isinstance(error, psycopg.errors.UndefinedFunction):
                    self._generations_ready.discard(generation)  # dropped meanwhile: made again next time
                if self._events_own(error):
                    raise
                return _AGAIN

    def _call_document(
        self,
        conn: psycopg.Connection[Any],
        function: str,
        stored_events: Sequence[StoredEvent],
        conversation: UUID | None,
        **kwargs: Any,
    ) -> list[int]:
        """Gathers one conversation's append into an `AppendDocument` and calls its function;
        returns the notification ids. `conversation`: the document's (a part of a batch), which
        the writer's `inline(cursor)` writes alone. Raises Unfit, or the server's error with the
        generation of its views (`generation`) set on it."""
        generation = None
        try:
            document = AppendDocument(conn, str(stored_events[0].originator_id), self._views_lock)
            document.conversation = conversation
            # the document stands in for the transaction's cursor: it gathers the writes as data
            self.write_first(document, stored_events, **kwargs)
            self.write_events(document, stored_events, **kwargs)
            views = document.doc.get("views")
            generation = views["g"] if views is not None else None
            if generation is not None:
                named = self._generation_function(conn, generation)
                if named is None:
                    raise Unfit("no append function of the views' generation")
                function = named
            return document.call(function)
        except Exception as error:
            error.generation = generation  # type: ignore[attr-defined]  # told to the caller with the error
            raise

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

    def write_first(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Writes, in the append's transaction (`curs`, or the `AppendDocument` that stands in
        for it), what goes before `stored_events`: nothing here (`ChainedPostgresRecorder`: the
        writer's rows). An error rolls the events back with it."""

    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """Takes the events table's write lock, sends the library's NOTIFY and inserts
        `stored_events` (returning their notification ids, `inserted_ids`) on `curs`, as the
        library's recorder does, with its statements (`lock_table_statements`, `channel_name`,
        `insert_events_statement`). Raises Unfit for an `AppendDocument`: this recorder's events
        go as statements."""
        if isinstance(curs, AppendDocument):
            raise Unfit("the plain recorder's events go as statements")
        for statement in self.lock_table_statements:
            curs.execute(statement)
        curs.execute(SQL("NOTIFY {}").format(Identifier(self.channel_name)))
        events = [self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events]
        curs.execute(self.insert_events_statement, (events,))

    @staticmethod
    def inserted_ids(curs: Any) -> list[int]:
        """Returns the notification ids the insert of `write_events` returned on `curs`."""
        return [row["notification_id"] for row in curs.fetchall()]

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Called once the transaction that stored `stored_events` has committed."""
