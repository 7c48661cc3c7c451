"""The composition root: builds each store and its collaborators once, for every entrypoint.

Per store it builds:
- the store (`ConversationStore`) on the backend the settings name, with the backend's factory,
  application recorder and ports (`StoreFactory.ports`: history index, idempotency keys);
- its data keys (`StoreFactory.data_keys`), given to the mapper before any read or write;
- its read models (`ReadModels`) on the view storage the backend hands in (`view_storage_of`,
  `read_models_for`), passed to the store as the views it keeps current (`StoreViews`).

`adapters.api.Chatrecord`, `chatrecord serve` and the tests' fixtures get their stores here. No object
sets another's collaborators after building it. A transaction's writes are handed on by the store, never
kept in a thread-local or global (`tests/unit/test_composition_root.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from eventsourcing.persistence import InfrastructureFactory

from adapters.backends import SQLITE_MODULE, backend_of
from adapters.backends.settings import read_store_env, store_env
from adapters.store.application import ConversationStore
from adapters.store.crypto import ViewTexts
from adapters.views.ports import ViewStorage
from adapters.views.readmodels import ReadModels


def view_storage_of(store: ConversationStore) -> ViewStorage:
    """Returns the view storage of `store` from its backend (`StoreFactory.view_storage`). Its texts are
    sealed with the store's data keys (`ViewTexts`), or not where the store keeps none."""
    keys = store.data_keys
    return backend_of(store.factory).view_storage(store.recorder, ViewTexts(keys) if keys is not None else None)


def read_models_for(store: ConversationStore) -> ReadModels:
    """Returns new read models of `store` on its backend's view storage (`view_storage_of`). Raises what
    ReadModels raises when the views' tables cannot be made."""
    return ReadModels(store, view_storage_of(store), view_storage_of)


def build_store(env: Mapping[str, str], *, views: bool = True) -> ConversationStore:
    """Returns a ConversationStore on `env` (library keys, e.g. `store_env()`'s) with its read models as
    views. `views=False` keeps none; reads then catch them up from the log. Raises what ConversationStore
    and ReadModels raise when the database cannot be opened."""
    settings = ConversationStore.environment(env)
    factory = InfrastructureFactory.construct(settings)
    try:
        recorder = factory.application_recorder()
        ports = backend_of(factory).ports(recorder)
        return ConversationStore(
            settings,
            factory=factory,
            recorder=recorder,
            ports=ports,
            views=read_models_for if views else None,
            reopen=lambda again: build_store(again, views=False),
        )
    except BaseException:
        factory.close()  # the connections of a store that could not be built
        raise


def open_store(
    environ: Mapping[str, str] | None = None, *, memory: bool = False, reading: bool = False, **overrides: str
) -> ConversationStore:
    """Returns a ConversationStore, with its read models, on the backend `store_env(environ, memory=memory)`
    picks.

    `overrides` are library env keys (e.g. SNAPSHOT_INTERVAL="10") that win. `reading`: the caller only
    reads; a SQLite file this process cannot write is opened read-only (`sqlite.read_only_uri`). Raises
    BadSetting (BadDatabaseURL) for a bad setting. Raises the library's or the driver's errors when the
    database cannot be opened (`settings.store_problem` says which are not bugs)."""
    env = store_env(environ, memory=memory)
    if reading and env.get("PERSISTENCE_MODULE") == SQLITE_MODULE:
        env["SQLITE_READING"] = "y"
    return build_store({**env, **overrides})


def open_read_store(environ: Mapping[str, str] | None = None) -> ConversationStore | None:
    """Returns a read-only ConversationStore, with its read models, on CHATRECORD_READ_DATABASE_URL. Returns
    None when that is not set. Raises as `open_store`."""
    env = read_store_env(environ)
    return build_store(env) if env is not None else None


class NoReadModels(TypeError):
    """Raised by `read_models` for a store built without them."""


def read_models(store: ConversationStore) -> ReadModels:
    """Returns the read models `store` was built with. Raises NoReadModels for a store built without them."""
    views = store.views
    if not isinstance(views, ReadModels):
        raise NoReadModels("this store keeps no read models; open it with adapters.bootstrap (open_store, build_store)")
    return views
