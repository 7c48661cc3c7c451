"""Replay for the command line: the checks of its arguments (a readable FILE, the pages the user
may not see). The reads themselves are the service layer's (`adapters.service.results`); their
names are re-exported here as the CLI has used them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from adapters.service.results import (
    Conversations,
    EmptyInput,
    TurnNotFound,
    UnreadableFile,
    file_conversations,
    no_turn,
    stored_conversation,
    turns_at,
)
from projections.page_line import PageCheck

__all__ = [
    "Conversations", "EmptyInput", "TurnNotFound", "UnreadableFile", "file_conversations", "no_turn",
    "page_check", "readable_file", "stored_conversation", "turns_at",
]


def readable_file(path: Path) -> Path:
    """Returns `path` when it names a file that can be read. Raises UnreadableFile, naming the
    path as given and why (`nofile.jsonl: no such file`), when it does not."""
    try:
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
    hidden = frozenset(denied)
    return lambda page_id: page_id not in hidden
