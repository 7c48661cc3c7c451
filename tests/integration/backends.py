"""How each backend's contract tests open stores on the test's own database: a SQLite file in
the test's folder, or a fresh PostgreSQL schema (`postgres_schema`); every store a test opens
is closed after it. Mixed into the `Test<Backend>…` classes beside their contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store
from adapters.store.application import ConversationStore


class OpenedStores:
    """Keeps the stores a test opened and closes them after it."""

    stores: list[ConversationStore]

    def _kept(self, store: ConversationStore) -> ConversationStore:
        self.stores.append(store)
        return store

    def _close_all(self) -> None:
        for store in self.stores:
            store.close()


class SQLiteStores(OpenedStores):
    """`open_store(views=True, **overrides)` on the SQLite file `self.path` of the test, with its
    read models (`adapters.bootstrap.build_store`); `views=False`: a store that keeps none."""

    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> Iterator[None]:
        self.path = tmp_path / "chatrecord.sqlite"
        self.stores = []
        yield
        self._close_all()

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        return self._kept(build_store({**sqlite_env(self.path), **overrides}, views=views))


class PostgresStores(OpenedStores):
    """`open_store(views=True, **overrides)` on the test's schema `self.schema` of the server
    `self.url`, as `SQLiteStores.open_store`."""

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str, postgres_schema: str) -> Iterator[None]:
        self.url, self.schema = postgres_url, postgres_schema
        self.stores = []
        yield
        self._close_all()

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        env = {**postgres_env(self.url), "POSTGRES_SCHEMA": self.schema, "POSTGRES_POOL_SIZE": "1"}
        return self._kept(build_store({**env, **overrides}, views=views))
