"""The import graph keeps its shape: the import-linter contracts in pyproject.toml hold (`lint-imports`:
the core imports nothing of the adapters and does no I/O, the adapters' layers import only downward,
each backend stands alone), and no module imports itself through others (no import circle, also
inside one layer, where the contracts allow imports both ways). Imports inside functions and under
TYPE_CHECKING count. Each check is also run on a copy of the source with a circle planted, and fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("domain", "projections", "adapters")

CIRCLES = """
import sys

import grimp


def circles(graph):
    \"\"\"The strongly connected components of more than one module (Tarjan's algorithm).\"\"\"
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


sys.setrecursionlimit(10_000)
graph = grimp.build_graph(*sys.argv[1:], cache_dir=None)
for component in circles(graph):
    print(" -> ".join(component))
"""


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the packages of `cwd`, not an installed copy
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports --no-cache --no-logo` in `cwd`."""
    return run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))",
        ],
        cwd,
    )


def circles(cwd: Path) -> list[str]:
    found = run([sys.executable, "-c", CIRCLES, *PACKAGES], cwd)
    assert found.returncode == 0, found.stderr
    return found.stdout.splitlines()


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source and its pyproject.toml, to plant imports in."""
    copy = tmp_path_factory.mktemp("source")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def plant(copy: Path, module: str, line: str) -> Path:
    path = copy / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {line}\n", encoding="utf-8")
    return path


def test_the_import_contracts_hold() -> None:
    checked = lint_imports(ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Contracts: 5 kept, 0 broken." in checked.stdout


def test_no_module_imports_itself_through_others() -> None:
    assert circles(ROOT) == []


def test_an_upward_import_inside_a_function_breaks_a_contract(planted: Path) -> None:
    path = plant(planted, "adapters/store/keys.py", "from adapters.cli import app  # noqa: F401")
    try:
        checked = lint_imports(planted)
    finally:
        path.write_text((ROOT / "adapters/store/keys.py").read_text(encoding="utf-8"), encoding="utf-8")
    assert checked.returncode == 1
    assert "adapters.store is not allowed to import adapters.cli" in checked.stdout
    assert "adapters.store.keys -> adapters.cli.app" in checked.stdout


def test_an_entrypoint_importing_below_the_api_breaks_a_contract(planted: Path) -> None:
    path = plant(planted, "adapters/cli/render.py", "from adapters.store.verify import head_line  # noqa: F401")
    try:
        checked = lint_imports(planted)
    finally:
        path.write_text((ROOT / "adapters/cli/render.py").read_text(encoding="utf-8"), encoding="utf-8")
    assert checked.returncode == 1
    assert "adapters.cli is not allowed to import adapters.store" in checked.stdout
    assert "adapters.cli.render -> adapters.store.verify" in checked.stdout


def test_the_core_importing_the_store_breaks_a_contract(planted: Path) -> None:
    path = plant(planted, "projections/row_fold.py", "import adapters.store.application  # noqa: F401")
    try:
        checked = lint_imports(planted)
    finally:
        path.write_text((ROOT / "projections/row_fold.py").read_text(encoding="utf-8"), encoding="utf-8")
    assert checked.returncode == 1
    assert "projections is not allowed to import adapters" in checked.stdout


def test_the_store_importing_its_views_breaks_the_strict_layers(planted: Path) -> None:
    # the backends above the views above the store: the read models import the store's
    # application, which here imports them back (a circle, and an upward import)
    path = plant(planted, "adapters/store/application.py", "from adapters.views.readmodels import ReadModels  # noqa: F401")
    try:
        found, checked = circles(planted), lint_imports(planted)
    finally:
        path.write_text((ROOT / "adapters/store/application.py").read_text(encoding="utf-8"), encoding="utf-8")
    assert any("adapters.store.application" in circle and "adapters.views.readmodels" in circle for circle in found), found
    assert checked.returncode == 1
    assert "adapters.store is not allowed to import adapters.views" in checked.stdout


@pytest.mark.parametrize(
    ("module", "imported", "words"),
    [
        (
            "adapters/store/keys.py",
            "from adapters.backends import SQLITE_MODULE",
            "adapters.store is not allowed to import adapters.backends",
        ),
        (
            "adapters/views/rule_diff.py",
            "from adapters.backends import SQLITE_MODULE",
            "adapters.views is not allowed to import adapters.backends",
        ),
    ],
)
def test_the_store_or_the_views_locating_a_backend_breaks_the_strict_layers(
    planted: Path, module: str, imported: str, words: str
) -> None:
    path = plant(planted, module, f"{imported}  # noqa: F401")
    try:
        checked = lint_imports(planted)
    finally:
        path.write_text((ROOT / module).read_text(encoding="utf-8"), encoding="utf-8")
    assert checked.returncode == 1
    assert words in checked.stdout
