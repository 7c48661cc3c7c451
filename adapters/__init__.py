"""chatrecord's adapters: the store, its read models and the entrypoints around the pure core
(`domain`, `projections`)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path


def version() -> str:
    """Returns the installed package's version, or the checkout's from pyproject.toml."""
    try:
        return metadata.version("chatrecord")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        found = re.search(r'^version = "([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M)
        return found.group(1) if found else "unknown"
