#!/usr/bin/env bash
# The checks, in the order CI runs them (.ci/run): the linter (`ruff check`), the formatter
# (`ruff format --check`), the type checker
# (`mypy`, strict, over domain, projections and adapters), the import contracts (`lint-imports`),
# then the tests (`pytest`). Each names what failed and stops there. All read their settings from
# pyproject.toml; `pip install -e '.[test]'` installs them at the versions the tree is clean with.
#
#   scripts/check.sh                 everything (the tests need a PostgreSQL: see .ci/run)
#   scripts/check.sh --static        the linter, the type checker and the import contracts only
#   scripts/check.sh -x tests/unit   extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

step() {
    local name=$1 hint=$2
    shift 2
    echo "check: $name" >&2
    if ! "$@"; then
        echo "check: $name failed (see above); $hint" >&2
        exit 1
    fi
}

step "ruff check" "fix the findings (many by: ruff check --fix); a '# noqa: CODE - reason' only where the code is right" \
    "$PYTHON" -m ruff check
step "ruff format" "reformat: ruff format (the formatter's output is the house style)" \
    "$PYTHON" -m ruff format --check
step "mypy" "fix the types; a '# type: ignore[code]' only where an untyped library leaves no other way, with the reason" \
    "$PYTHON" -m mypy
step "import contracts" "an import runs upward or across independent modules: see the contract named above" \
    "$PYTHON" -c "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"

if [ "${1:-}" = "--static" ]; then
    exit 0
fi
step "pytest" "see the failures above" "$PYTHON" -m pytest "$@"
