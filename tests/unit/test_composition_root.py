"""One composition root (`adapters.bootstrap`): a Chatrecord's store, read models and idempotency
keys are built once and wired at construction; nothing in the source sets an object's
collaborators after building it, and no thread-local or module-global state carries what one
layer did to another. The source checks read the AST of every module of `adapters/`."""

from __future__ import annotations

import ast
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import InfrastructureFactory

from adapters.api import Chatrecord
from adapters.backends.settings import memory_env
from adapters.bootstrap import NoReadModels, build_store, open_store, read_models, read_models_for, view_storage_of
from adapters.store.application import ConversationStore
from adapters.views.readmodels import ReadModels
from domain.events import conversation_uuid

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo_seo_tour.jsonl"

ONCE_SET_HOOKS = {"idempotency_keys", "on_saved", "inline_views", "inline_begun", "inline_committed", "forgotten"}
"""The hooks ReadModels once set on a store (and the keys once found by the store itself)."""

PLAIN = (int, float, str, bytes, bool, type(None))
STATE = (dict, list, set, frozenset, tuple, deque)
"""An object's own state, not a collaborator: its containers (and its locks)."""


def collaborators_of(held: object, seen: dict[int, object]) -> set[str]:
    """Returns the name of every collaborator `held` holds (each attribute whose value is an
    object, not a plain value, a container or a lock), and of theirs in turn, through every first-party object
    (`adapters.`) reached: the store's views, their storage, the store's ports, its recorder."""
    seen[id(held)] = held
    names: set[str] = set()
    for name, value in vars(held).items():
        if isinstance(value, PLAIN + STATE) or type(value).__module__ in ("threading", "_thread"):
            continue
        names.add(name)
        first_party = type(value).__module__.startswith("adapters.")
        if first_party and id(value) not in seen and hasattr(value, "__dict__"):
            names |= collaborators_of(value, seen)
    return names


def store_collaborators() -> set[str]:
    """Returns the name of every collaborator a store built by the composition root holds, in
    memory and on SQLite, of theirs in turn (`collaborators_of`), and the hooks once set on it."""
    held: set[str] = set()
    with tempfile.TemporaryDirectory() as folder:
        for store in (open_store(memory=True), open_store({"CHATRECORD_DB": str(Path(folder) / "c.sqlite")})):
            try:
                held |= collaborators_of(store, {})
            finally:
                store.close()
    return held | ONCE_SET_HOOKS


THREAD_LOCALS = {
    "adapters/backends/postgres/chained_recorder.py": "the hashes between a recorder's insert and its commit, inside the recorder",
}
"""The modules that may make a `threading.local()`, and what it holds (never handed to another layer)."""

GLOBALS = {
    "adapters/cli/helptypes.py": "a once-per-process flag of the help's own patch",
}
"""The modules that may rebind a module global (`global`), and why."""


def sources() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted((ROOT / "adapters").rglob("*.py"))
    ]


def assigned_attributes(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Returns (line, object, attribute) of every assignment to an attribute of a name other than
    `self` or `cls` (`x.attr = ...`, `x.attr += ...`, `a, x.attr = ...`, `setattr(x, "attr", ...)`),
    but for a name the function bound to a part of `self` (`own_parts`)."""
    found: list[tuple[int, str, str]] = []

    def targets(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, (ast.Tuple, ast.List)):
            return [t for element in node.elts for t in targets(element)]
        return [node]

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            every = [t for target in node.targets for t in targets(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            every = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(node.args[0], ast.Name) and isinstance(name, ast.Constant) and isinstance(name.value, str):
                found.append((node.lineno, node.args[0].id, name.value))
            continue
        else:
            continue
        for target in every:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id not in ("self", "cls")
            ):
                found.append((target.lineno, target.value.id, target.attr))
    own = own_parts(tree)
    return [(line, name, attr) for line, name, attr in found if not any(a <= line <= b and name in n for a, b, n in own)]


def own_parts(tree: ast.Module) -> list[tuple[int, int, set[str]]]:
    """Returns (first line, last line, names) of every function whose local names bind a part
    of the object itself (`x = self.attr`, `x = getattr(self, "attr", ...)`): what it sets on
    them is its own state (a thread-local of its own, say), not another object's wiring."""
    found: list[tuple[int, int, set[str]]] = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names: set[str] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" and value.args:
                    value = value.args[0]
                elif isinstance(value, ast.Attribute):
                    value = value.value
                if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                    names.add(node.targets[0].id)
        if names:
            found.append((function.lineno, function.end_lineno or function.lineno, names))
    return found


def test_nothing_sets_a_stores_collaborators_after_building_it() -> None:
    collaborators = store_collaborators()
    rewired = [
        f"{path}:{line}: {name}.{attr} = ..."
        for path, tree in sources()
        for line, name, attr in assigned_attributes(tree)
        if attr in collaborators
    ]

    assert rewired == []


def test_the_collaborators_checked_are_every_one_the_store_is_built_with() -> None:
    handed_in = {"factory", "recorder", "history", "views", "_idempotency_keys"}
    made_by_the_library = {"mapper", "events", "snapshots", "_repository", "_notification_log"}
    own_caches = {"known"}

    of_the_views = {"storage", "texts", "view_tables", "datastore"}  # the views' storage and its sealer, handed in

    assert handed_in | made_by_the_library | own_caches | of_the_views <= store_collaborators()
    assert {"factory", "recorder", "ports", "views"} <= set(ConversationStore.__init__.__code__.co_varnames)


def test_the_check_finds_a_hook_set_from_outside() -> None:
    planted = ast.parse("def wire(store, models):\n    store.on_saved = models.apply\n    setattr(store, 'views', models)\n")

    assert assigned_attributes(planted) == [(2, "store", "on_saved"), (3, "store", "views")]
    own = ast.parse("def seal(self, heads):\n    sealing = getattr(self, '_sealing', None)\n    sealing.heads = heads\n")
    assert assigned_attributes(own) == []  # the object's own part (here a thread-local of its own)


def test_the_store_declares_no_hook_to_be_set_from_outside() -> None:
    tree = ast.parse((ROOT / "adapters" / "store" / "application.py").read_text(encoding="utf-8"))
    store = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConversationStore")
    hooks = [
        n.target.id
        for n in store.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and isinstance(n.value, ast.Constant)
        and n.value.value is None
        and "Callable" in ast.unparse(n.annotation)
    ]

    assert hooks == []
    assert "views" in ConversationStore.__init__.__code__.co_varnames  # given at construction


def test_only_the_composition_root_builds_read_models_for_a_store() -> None:
    calls = [
        (path, node.lineno)
        for path, tree in sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ReadModels"
    ]
    # a rebuild's forked worker folds its part with the views' storage of its own store, which the
    # composition root hands in (`read_models_for`'s `reopen`, `adapters.views.rebuild`)
    assert [path for path, _ in calls] == ["adapters/bootstrap.py"]


def test_no_thread_local_or_module_global_state_outside_the_few_that_say_why() -> None:
    made: dict[str, list[int]] = {}
    for path, tree in sources():
        for node in ast.walk(tree):
            local = isinstance(node, ast.Call) and ast.unparse(node.func) in ("threading.local", "local")
            rebinds = isinstance(node, ast.Global)
            if local and path not in THREAD_LOCALS or rebinds and path not in GLOBALS:
                made.setdefault(path, []).append(node.lineno)

    assert made == {}


def test_a_chatrecord_builds_its_store_and_read_models_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: dict[str, int] = {"ConversationStore": 0, "ReadModels": 0}
    for cls in (ConversationStore, ReadModels):
        original = cls.__init__

        def counting(self: Any, *args: Any, __original: Any = original, __name: str = cls.__name__, **kwargs: Any) -> None:
            built[__name] += 1
            __original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    monkeypatch.setattr("adapters.bootstrap.store_env", lambda environ=None, memory=False: memory_env())

    chatrecord = Chatrecord()
    chatrecord.ingest(DEMO.read_text(encoding="utf-8").splitlines(), DEMO.name)
    turn = chatrecord.turn_input("conv-demo-seo")
    chatrecord.rebuild("2026-11-01")
    again = chatrecord.turn_input("conv-demo-seo")

    assert built == {"ConversationStore": 1, "ReadModels": 1}
    assert chatrecord.read_models is chatrecord.store.views is chatrecord._on_primary.read_models
    assert chatrecord.store.idempotency_keys is chatrecord.store.idempotency_keys
    assert len(turn.notes) == 14 and turn.message == again.message == 3
    chatrecord.close()


def test_a_store_built_without_read_models_says_so() -> None:
    store = build_store(memory_env(), views=False)

    with pytest.raises(NoReadModels, match="keeps no read models"):
        read_models(store)
    with pytest.raises(NoReadModels):
        Chatrecord(store).turn_input("conv-demo-seo")
    assert isinstance(read_models(open_store(memory=True)), ReadModels)


def test_the_store_uses_the_ports_it_is_handed_and_makes_their_tables_once() -> None:
    from adapters.backends.memory import MemoryHistoryTables, MemoryIdempotencyKeys
    from adapters.store.ports import StorePorts

    class CountingKeys(MemoryIdempotencyKeys):
        def __init__(self) -> None:
            super().__init__()
            self.created = 0

        def create(self) -> None:
            self.created += 1

    settings = ConversationStore.environment(memory_env())
    factory = InfrastructureFactory.construct(settings)
    recorder = factory.application_recorder()
    history, keys = MemoryHistoryTables(), CountingKeys()
    store = ConversationStore(
        settings, factory=factory, recorder=recorder, ports=StorePorts(history, keys), views=read_models_for
    )
    chatrecord = Chatrecord(store)
    chatrecord.ingest(DEMO.read_text(encoding="utf-8").splitlines(), DEMO.name)

    assert store.factory is factory and store.recorder is recorder and store.history is history
    assert history.reader(conversation_uuid("conv-demo-seo")).version == len(
        recorder.select_events(conversation_uuid("conv-demo-seo"))
    )
    assert keys.created == 0  # a store that has not used its keys made no table
    assert store.idempotency_keys is store.idempotency_keys is keys and keys.created == 1
    chatrecord.close()


def test_the_view_storage_is_built_with_the_sealer_of_the_stores_data_keys(tmp_path: Path) -> None:
    memory = open_store(memory=True)
    sqlite = open_store({"CHATRECORD_DB": str(tmp_path / "c.sqlite")})
    plain = build_store({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "p")})
    try:
        for store in (memory, sqlite):
            storage = read_models(store).storage
            assert storage.texts is not None and storage.texts.keys is store.mapper.keys  # type: ignore[attr-defined]
        assert read_models(plain).storage.texts is None  # the library's mapper keeps no data keys
        # the in-memory views' rows live with the recorder: another storage of the store sees them
        assert view_storage_of(memory).view_tables is read_models(memory).storage.view_tables  # type: ignore[attr-defined]
    finally:
        for store in (memory, sqlite, plain):
            store.close()


DRIVERS = ("psycopg", "psycopg_pool", "sqlite3")
"""The database drivers' modules, which only the backends (`adapters/backends/`) import."""


def test_the_store_imports_no_database_driver() -> None:
    imported = [
        (str(path.relative_to(ROOT)), node.lineno)
        for path in sorted((ROOT / "adapters" / "store").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import)
        and any(a.name.split(".")[0] in DRIVERS for a in node.names)
        or isinstance(node, ast.ImportFrom)
        and (node.module or "").split(".")[0] in DRIVERS
    ]

    assert imported == []


def test_which_error_is_a_lost_connection_the_backend_says() -> None:
    import psycopg
    import psycopg.errors
    from eventsourcing.persistence import OperationalError
    from psycopg_pool import PoolTimeout

    from adapters.backends.memory import MemoryFactory
    from adapters.backends.postgres import PostgresFactory
    from adapters.backends.sqlite import SQLiteFactory

    def wrapped(driver: BaseException) -> OperationalError:
        error = OperationalError(str(driver))
        error.__cause__ = driver  # as the library raises it
        return error

    lost = [PoolTimeout("no connection"), psycopg.OperationalError("server closed"), psycopg.errors.AdminShutdown("bye")]
    answered = [psycopg.errors.SerializationFailure("conflict"), psycopg.errors.UndefinedTable("no table"), ValueError("x")]

    assert [PostgresFactory.connection_lost(wrapped(e)) for e in lost] == [True, True, True]
    assert [PostgresFactory.connection_lost(wrapped(e)) for e in answered] == [False, False, False]
    assert [SQLiteFactory.connection_lost(wrapped(e)) or MemoryFactory.connection_lost(wrapped(e)) for e in lost] == [False] * 3
    store = open_store(memory=True)
    assert store.connection_lost == MemoryFactory.connection_lost  # as the composition root handed it in
    store.close()


class Flaky(Exception):
    """A driver's lost connection, in a test."""


def test_a_write_is_tried_again_on_what_the_backend_calls_a_lost_connection() -> None:
    from eventsourcing.persistence import OperationalError

    from adapters.backends.memory import ChainedPOPORecorder, MemoryHistoryTables, MemoryIdempotencyKeys
    from adapters.store.ports import StorePorts

    class DropsOnce(ChainedPOPORecorder):
        dropped = 0

        def _insert_events(self, stored_events: Any, **kwargs: Any) -> Any:
            if not self.dropped:
                self.dropped += 1
                raise OperationalError("the connection broke off") from Flaky()
            return super()._insert_events(stored_events, **kwargs)

    def store_on(lost: Any) -> ConversationStore:
        settings = ConversationStore.environment({**memory_env(), "WRITE_RETRY_SECONDS": "5"})
        factory = InfrastructureFactory.construct(settings)
        ports = StorePorts(MemoryHistoryTables(), MemoryIdempotencyKeys(), connection_lost=lost)
        return ConversationStore(settings, factory=factory, recorder=DropsOnce(), ports=ports, views=read_models_for)

    lines = DEMO.read_text(encoding="utf-8").splitlines()
    retried = store_on(lambda error: isinstance(error.__cause__, Flaky))
    Chatrecord(retried).ingest(lines, DEMO.name)
    assert retried.reconnects == 1 and retried.recorder.dropped == 1  # type: ignore[attr-defined]
    assert len(retried.recorder.select_events(conversation_uuid("conv-demo-seo"))) > 0
    retried.close()

    unnamed = store_on(StorePorts.connection_lost)  # the default: no error is a lost connection
    Chatrecord(unnamed).ingest(lines, DEMO.name)  # (the ingest stores line by line the batch it could not store)
    assert unnamed.reconnects == 0 and unnamed.recorder.dropped == 1  # type: ignore[attr-defined]
    unnamed.close()
