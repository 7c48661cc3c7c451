"""Keeping one snapshot per conversation.

The library keeps every snapshot it is given (its snapshot table is keyed by conversation and
version). A Conversation's state grows with its history (every segment id, every input digest),
so a snapshot every 100 versions would store O(n²) bytes: 30 snapshots of a 3,000-segment
conversation held 5.9 MB beside 0.8 MB of events. Only the newest snapshot is ever read
(`Repository.get` asks for the last one at or below the version), so the older ones are
deleted once a newer one is stored. The events themselves are never touched.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.persistence import AggregateRecorder
from eventsourcing.popo import POPOAggregateRecorder
from eventsourcing.postgres import PostgresAggregateRecorder
from eventsourcing.sqlite import SQLiteAggregateRecorder
from psycopg.sql import SQL, Identifier


def prune_older_snapshots(recorder: AggregateRecorder, aggregate_id: UUID, version: int) -> None:
    """Deletes the snapshots of `aggregate_id` older than `version` from the library's snapshot
    `recorder` (SQLite, PostgreSQL, or in memory, where they leave the recorder's index).

    Raises the library's or the driver's database errors; TypeError for another recorder.
    """
    if isinstance(recorder, SQLiteAggregateRecorder):
        key = aggregate_id.hex if recorder.datastore.originator_id_type == "uuid" else str(aggregate_id)
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"DELETE FROM {recorder.events_table_name} WHERE originator_id = ? AND originator_version < ?",
                (key, version),
            )
    elif isinstance(recorder, PostgresAggregateRecorder):
        statement = SQL("DELETE FROM {}.{} WHERE originator_id = %s AND originator_version < %s").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)
        )
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute(statement, (aggregate_id, version))
    elif isinstance(recorder, POPOAggregateRecorder):
        with recorder._database_lock:  # the library's own lock and index: nothing public deletes
            index = recorder._stored_events_index[str(aggregate_id)]
            for old in [v for v in index if v < version]:
                del index[old]
    else:
        raise TypeError(f"cannot prune snapshots of a {type(recorder).__name__}")
