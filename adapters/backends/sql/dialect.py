"""How the two SQL backends differ in shared statements: the driver's placeholder and the schema."""

from __future__ import annotations

from dataclasses import dataclass

SQLITE_PARAM = "?"
POSTGRES_PARAM = "%s"


@dataclass(frozen=True)
class Dialect:
    """`param`: the driver's placeholder (`?` for sqlite3, `%s` for psycopg). `schema`: the
    tables' schema, "" for none (SQLite). A schema name is one SQL identifier
    (`adapters.backends.settings.SCHEMA_NAME`), quoted here."""

    param: str = SQLITE_PARAM
    schema: str = ""

    def table(self, name: str) -> str:
        """Returns `name` qualified by the schema, where there is one."""
        if not self.schema:
            return name
        return '"' + self.schema.replace('"', '""') + '".' + name

    def params(self, count: int) -> str:
        """Returns `count` placeholders separated by commas."""
        return ", ".join([self.param] * count)


SQLITE = Dialect()
