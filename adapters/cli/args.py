"""The checks of the command line's arguments: a readable FILE, the pages the user may not see."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from adapters.api import UnreadableFile
from projections.page_line import PageCheck, PageFilter

__all__ = ["UnreadableFile", "page_check", "readable_file"]


def readable_file(path: Path) -> Path:
    """Returns `path` when it names a readable file. Raises UnreadableFile naming the path and why
    (`nofile.jsonl: no such file`). A pipe is not opened here, only its permission checked; opening it
    would lose data."""
    try:
        if path.is_fifo():
            if not os.access(path, os.R_OK):
                raise PermissionError(path)
            return path
        with path.open("rb"):
            return path
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "is a folder, not a file"
    except PermissionError:
        reason = "not readable (permission denied)"
    except OSError as error:
        reason = f"cannot be read ({error.strerror or error})"
    raise UnreadableFile(f"{path}: {reason}")


def page_check(denied: Collection[int]) -> PageCheck:
    """Returns the page check of a user who may see every page except `denied`."""
    return PageFilter(hidden=frozenset(denied))
