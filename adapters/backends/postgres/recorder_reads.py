"""The application recorder's reads (`RecorderReads`, which `EventRecorder` extends with its
appends): the library's reads of events and notifications, a rebuild's reads in parts, tried
again only when the connection failed, not when the server answered or the pool waited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from eventsourcing import postgres as es_postgres
from eventsourcing.persistence import InterfaceError, Notification, OperationalError, StoredEvent
from eventsourcing.utils import retry
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier
from psycopg_pool import PoolTimeout

T = TypeVar("T")


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


class RecorderReads(es_postgres.PostgresApplicationRecorder):
    """The library's application recorder whose reads are tried again only when the connection
    failed (`_read_retried`); `EventRecorder` adds how an append is sent."""

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

        def read(recorder: RecorderReads) -> list[Notification]:
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

        def read(recorder: RecorderReads) -> list[int]:
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
            if isinstance(cause, PoolTimeout) or getattr(cause, "sqlstate", None):
                raise _Answered(error) from error
            raise
