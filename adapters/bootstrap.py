"""The composition root: builds a store and what it is wired with, once, for every entrypoint.

As Cosmic Python's `bootstrap.py` (src/allocation/bootstrap.py in cosmicpython/code) builds its
unit of work and message bus once and hands each handler its dependencies, this module builds,
per store:

- the store (`ConversationStore`) on the backend the settings name (`adapters.backends.settings`):
  the backend's infrastructure factory, the application recorder it makes, and its
  implementations of the store's ports (`StoreFactory.ports`: the history index and the
  idempotency keys), all made here and handed to the store as it is built;
- its data keys, made once by the backend's factory (`StoreFactory.data_keys`) and given to the
  mapper that factory makes, before the store reads or writes anything;
- its read models (`ReadModels`), on the view storage its backend hands out, built with the
  sealer of its rows' texts (`view_storage_of`, `read_models_for`: the storage is handed in,
  the views never look it up; the in-memory views' rows live with its recorder): passed to the
  store at construction as the views it keeps current as it saves
  (`ConversationStore(views=read_models_for)`, `StoreViews`), one per store;
  `read_models(store)` returns them;
- its idempotency keys (`ConversationStore.idempotency_keys`), handed in with the ports; their
  table is made on first use, so a store that only reads never makes it.

`adapters.api.Chatrecord()` (and through it the command line), `chatrecord serve`
(`adapters.http.server`, and the app its workers build) and the tests' fixtures get their stores
here. No object sets another's collaborators after building it, and what a transaction wrote is
handed on by the store, never kept in a thread-local or module-global
(`tests/unit/test_composition_root.py` holds both).
"""

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
    """Returns where the read models of `store` live, as its backend hands it out
    (`StoreFactory.view_storage`), built with the sealer of the transcript rows' texts: the
    store's data keys (`ViewTexts`), or none where the store keeps none."""
    keys = store.data_keys
    return backend_of(store.factory).view_storage(store.recorder, ViewTexts(keys) if keys is not None else None)


def read_models_for(store: ConversationStore) -> ReadModels:
    """Returns new read models of `store`, on the view storage its backend hands out
    (`view_storage_of`), which a rebuild's worker process also gets for the store it opens anew.
    Raises what ReadModels raises when the views' tables cannot be made."""
    return ReadModels(store, view_storage_of(store), view_storage_of)


def build_store(env: Mapping[str, str], *, views: bool = True) -> ConversationStore:
    """Returns a ConversationStore on `env` (the library's keys, e.g. `store_env()`'s) with its
    read models as its views; `views=False`: one that keeps none (a bulk load whose read models a
    rebuild folds afterwards; every read catches them up from the log). Raises what
    ConversationStore and ReadModels raise when the database cannot be opened."""
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
    """Returns a ConversationStore, with its read models, on the backend
    `store_env(environ, memory=memory)` picks; `overrides` are library env keys (e.g.
    SNAPSHOT_INTERVAL="10") that win over it. `reading`: the caller only reads (audit, verify,
    replay of a stored conversation): a SQLite file this process cannot write (permissions, a
    read-only file system) is opened read-only (`adapters.backends.sqlite.read_only_uri`)
    instead of failing at its first write.

    Raises BadSetting (BadDatabaseURL) for a bad setting; the library's or the driver's errors
    when the database cannot be opened (`adapters.backends.settings.store_problem` says which are
    not bugs).
    """
    env = store_env(environ, memory=memory)
    if reading and env.get("PERSISTENCE_MODULE") == SQLITE_MODULE:
        env["SQLITE_READING"] = "y"
    return build_store({**env, **overrides})


def open_read_store(environ: Mapping[str, str] | None = None) -> ConversationStore | None:
    """Returns a ConversationStore, with its read models, on CHATRECORD_READ_DATABASE_URL
    (`read_store_env`), opened read-only, or None when that is not set. Raises as `open_store`."""
    env = read_store_env(environ)
    return build_store(env) if env is not None else None


class NoReadModels(TypeError):
    """Raised by `read_models` for a store built without them (`build_store(views=False)`, or
    `ConversationStore` built directly)."""


def read_models(store: ConversationStore) -> ReadModels:
    """Returns the read models `store` was built with (its views). Raises NoReadModels for a
    store built without them."""
    views = store.views
    if not isinstance(views, ReadModels):
        raise NoReadModels("this store keeps no read models; open it with adapters.bootstrap (open_store, build_store)")
    return views
