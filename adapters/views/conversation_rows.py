"""One conversation's read model rows, by the names the views' storage and the read models
import them under: the modules that hold them are `adapters.views.row_tables` (the tables'
names and statements), `row_bodies` (the rows' bodies read back as models), `sql_rows` (the
rows read and written in SQL), `prefetched_rows` (a turn read's rows read already),
`buffered_writes` (the writes held until a flush, the newest rows an append left) and
`memory_rows` (the rows in memory).
"""

from __future__ import annotations

from adapters.views.buffered_writes import BufferedRows, RecentRows
from adapters.views.prefetched_rows import PrefetchedRows
from adapters.views.row_bodies import decode_messages
from adapters.views.row_tables import (
    OVERVIEW_TABLES,
    TABLES,
    activity_index,
    create_statements,
    overview_table_names,
    table_names,
)
from adapters.views.sql_rows import ReadMoved, SQLRows

__all__ = [
    "OVERVIEW_TABLES",
    "TABLES",
    "BufferedRows",
    "PrefetchedRows",
    "ReadMoved",
    "RecentRows",
    "SQLRows",
    "activity_index",
    "create_statements",
    "decode_messages",
    "overview_table_names",
    "table_names",
]
