"""The views' tables in the SQLite file (`SQLiteViewStorage`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from adapters.backends.sql.views_storage import SQLViewStorage


class SQLiteViewStorage(SQLViewStorage):
    """The views' tables in the SQLite file (`adapters.backends.sql.views_storage.SQLViewStorage`)."""

    def _id(self, cid: UUID) -> Any:
        return cid.hex  # the library stores a UUID's hex

    def _tables(self, curs: Any) -> list[str]:
        return [r["name"] for r in self._x(curs, "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
