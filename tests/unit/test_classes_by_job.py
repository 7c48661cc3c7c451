"""Classes by job (STYLE.md, "Size, jobs and docstrings"; issue 36, item 5).

No first-party base class (a class of domain/, projections/ or adapters/ that another of them
subclasses) has exactly one subclass, unless it is a port: a `Protocol`, or an ABC that declares
at least one `@abstractmethod`. A base with one subclass is one class spread over two; fold it
back, or split it by job. Exceptions are left out: an error's subclass names a narrower case a
caller may catch by the wider name.

The classes are read from the source (`ast`), not imported, so nothing runs. A base name is
resolved through its module's imports and top-level classes; a class built at run time is not
seen.

Module size is a softer check: a module over `REVIEW_LINES` lines fails with a request to review
it (is it one job?); a reviewed one goes in `REVIEWED_LONGER` with the reason it stays whole.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("domain", "projections", "adapters")
SOURCE = (*FIRST_PARTY, "scripts")
"""Where modules are counted for size; scripts count as source, tests do not."""

REVIEW_LINES = 600
"""A module longer than this asks for a review: split it by job, or say in REVIEWED_LONGER why not."""

REVIEWED_LONGER: dict[str, str] = {
    "adapters/api.py": (
        "the one door of the entrypoints: Chatrecord's short methods, each handing a use case to the object of its"
        " job (writes, reads, replay streams, upkeep, reproductions), and the names the entrypoints import;"
        " split, a caller would have to know which object does what"
    ),
}
"""Modules over REVIEW_LINES that were reviewed and stay one module, each with the reason."""

KNOWN_SINGLE_SUBCLASS: set[str] = set()
"""The bases with one subclass that issue 36 folds back (or splits by job). It only shrinks: a class
on it that no longer offends (folded, renamed or moved) fails the test until it is taken off."""

PORT_BASES = {"typing.Protocol", "typing_extensions.Protocol", "abc.ABC"}
ABSTRACT = {"abc.abstractmethod", "abstractmethod"}
EXCEPTION_ROOTS = {"Exception", "BaseException", "ValueError", "KeyError", "LookupError", "RuntimeError", "OSError"}


@dataclass
class ClassInfo:
    """A class as the source declares it: its resolved base names, what it declares, where it is."""

    name: str
    where: str
    bases: list[str]
    metaclass: str | None = None
    abstract_methods: list[str] = field(default_factory=list)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Returns each name a module binds by import or by a top-level class, with its full dotted name."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                source = ".".join([*package, *([source] if source else [])])
            for alias in node.names:
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = f"{module}.{node.name}"
    return names


def _resolve(expression: ast.expr, names: dict[str, str]) -> str:
    if isinstance(expression, ast.Subscript):  # Generic[T], Protocol[T], a generic base
        expression = expression.value
    dotted = ast.unparse(expression)
    head, _, rest = dotted.partition(".")
    return names.get(head, head) + (f".{rest}" if rest else "")


def read_classes(root: Path, packages: tuple[str, ...] = FIRST_PARTY) -> dict[str, ClassInfo]:
    """Returns every class the modules under `packages` of `root` declare, by full dotted name."""
    classes: dict[str, ClassInfo] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(root, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            names = _imported_names(tree, module, path.name == "__init__.py")
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                metaclass = next((_resolve(k.value, names) for k in node.keywords if k.arg == "metaclass"), None)
                abstract = [
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and any(_resolve(d, names) in ABSTRACT for d in item.decorator_list)
                ]
                classes[f"{module}.{node.name}"] = ClassInfo(
                    name=f"{module}.{node.name}",
                    where=f"{path.relative_to(root).as_posix()}:{node.lineno}",
                    bases=[_resolve(base, names) for base in node.bases],
                    metaclass=metaclass,
                    abstract_methods=abstract,
                )
    return classes


def _ancestors(name: str, classes: dict[str, ClassInfo]) -> set[str]:
    """Returns the names of `name`'s bases, the first-party ones followed up, the others as named."""
    seen: set[str] = set()
    todo = list(classes[name].bases) if name in classes else []
    while todo:
        base = todo.pop()
        if base not in seen:
            seen.add(base)
            todo.extend(classes[base].bases if base in classes else [])
    return seen


def is_port(name: str, classes: dict[str, ClassInfo]) -> bool:
    """True for a Protocol, or an ABC (ABC or ABCMeta in its line) declaring an abstract method."""
    info = classes[name]
    ancestors = _ancestors(name, classes)
    if any(base.endswith("Protocol") and base in PORT_BASES for base in info.bases):
        return True
    metaclasses = {info.metaclass} | {classes[a].metaclass for a in ancestors if a in classes}
    is_abc = "abc.ABC" in ancestors or "abc.ABCMeta" in metaclasses
    return is_abc and bool(info.abstract_methods)


def is_error(name: str, classes: dict[str, ClassInfo]) -> bool:
    """True for an exception class (its line reaches a built-in exception)."""
    return any(base.split(".")[-1] in EXCEPTION_ROOTS or base.endswith("Error") for base in _ancestors(name, classes))


def single_subclass_bases(classes: dict[str, ClassInfo]) -> dict[str, str]:
    """Returns each first-party base that has exactly one first-party subclass and is neither a port
    nor an exception: its name -> "where it is -> its one subclass"."""
    children: dict[str, list[str]] = {}
    for info in classes.values():
        for base in info.bases:
            children.setdefault(base, []).append(info.name)
    return {
        base: f"{classes[base].where} -> {subclasses[0]}"
        for base, subclasses in sorted(children.items())
        if base in classes and len(subclasses) == 1 and not is_port(base, classes) and not is_error(base, classes)
    }


def line_counts(root: Path = ROOT) -> dict[str, int]:
    """Returns the number of lines of each source module, by its path from the project root."""
    counts = {}
    for folder in SOURCE:
        for path in sorted((root / folder).rglob("*.py")):
            counts[path.relative_to(root).as_posix()] = len(path.read_text(encoding="utf-8").splitlines())
    return counts


def test_no_new_base_class_has_exactly_one_subclass() -> None:
    new = {k: v for k, v in single_subclass_bases(read_classes(ROOT)).items() if k not in KNOWN_SINGLE_SUBCLASS}
    assert new == {}, (
        "these base classes have one subclass each: fold the subclass into its base, split the pair by job,"
        f" or make the base a port (a Protocol, or an ABC with @abstractmethod): {new}"
    )


def test_every_known_single_subclass_base_still_offends() -> None:
    offending = single_subclass_bases(read_classes(ROOT))
    gone = sorted(KNOWN_SINGLE_SUBCLASS - offending.keys())
    assert gone == [], f"these no longer have exactly one subclass (or are gone): take them off KNOWN_SINGLE_SUBCLASS: {gone}"


def test_no_module_is_over_the_review_threshold_unreviewed() -> None:
    longer = {path: n for path, n in line_counts().items() if n > REVIEW_LINES and path not in REVIEWED_LONGER}
    assert longer == {}, (
        f"these modules are over {REVIEW_LINES} lines: review each (one job? split it by job, never by size),"
        f" and if it stays whole add it to REVIEWED_LONGER with the reason: {longer}"
    )


def test_every_reviewed_longer_module_is_still_longer() -> None:
    counts = line_counts()
    assert [path for path in REVIEWED_LONGER if counts.get(path, 0) <= REVIEW_LINES] == [], "take them off REVIEWED_LONGER"


def test_the_scan_sees_every_source_folder_and_the_known_ports() -> None:
    counts = line_counts()
    assert {path.split("/")[0] for path in counts} == set(SOURCE)
    classes = read_classes(ROOT)
    assert {name.split(".")[0] for name in classes} == set(FIRST_PARTY)
    assert is_port("domain.history_index.History", classes)  # a Protocol with one implementation, allowed
    assert is_error("domain.errors.CardAlreadyDecided", classes)


PLANTED = {
    "one/__init__.py": "",
    "one/bases.py": """
from abc import ABC, ABCMeta, abstractmethod
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")

class Lone:
    pass

class Twice:
    pass

class Port(Protocol):
    def go(self) -> None: ...

class AbstractPort(ABC):
    @abstractmethod
    def go(self) -> None: ...

class MetaPort(metaclass=ABCMeta):
    @abstractmethod
    def go(self) -> None: ...

class AbcWithoutAbstract(ABC):
    def go(self) -> None: ...

class GenericLone(Generic[T]):
    pass

class Failure(Exception):
    pass
""",
    "one/subs.py": """
import one.bases as b
from one.bases import AbcWithoutAbstract, AbstractPort, Failure, GenericLone, Lone, MetaPort, Port, Twice

class A(Lone): pass
class B(Twice): pass
class C(b.Twice): pass
class D(Port): pass
class E(AbstractPort): pass
class F(MetaPort): pass
class G(AbcWithoutAbstract): pass
class H(GenericLone[int]): pass
class I(Failure): pass
""",
}


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, ClassInfo]:
    for name, text in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return read_classes(tmp_path, ("one",))


def test_a_planted_single_subclass_base_is_found_and_ports_and_errors_are_not(planted: dict[str, ClassInfo]) -> None:
    assert sorted(single_subclass_bases(planted)) == ["one.bases.AbcWithoutAbstract", "one.bases.GenericLone", "one.bases.Lone"]
    assert single_subclass_bases(planted)["one.bases.Lone"] == "one/bases.py:7 -> one.subs.A"
