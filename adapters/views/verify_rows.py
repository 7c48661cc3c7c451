"""Holding each conversation's read-model rows against a fold of its log (`verify --rows`). A turn read
checks only the summary's version, the entry count and, with kept notes, the chain's hash. So a row
rewritten in the database with its version unchanged is served. `check_rows` reads the rows in one
snapshot (`ReadModels.snapshot`), folds the log up to the summary's version under the same rule set, and
names the parts that differ. `chatrecord rebuild` writes the rows again."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from adapters.views.log_fold import fold_into
from adapters.views.memory_rows import MemoryConversation, MemoryRows
from adapters.views.readmodels import ReadModels
from adapters.views.row_state import _state
from domain.errors import ChatrecordError
from projections.rules import resolve

PARTS = ("head", "transcript", "run record", "card outcomes")
"""What `check_rows` compares, in the order a verdict names them."""


@dataclass(frozen=True)
class RowsVerdict:
    """One conversation's rows against the fold of its log at `version`. `differs` names the differing parts
    (of PARTS); empty when they match. `problem` is set instead when the rows or log could not be read.
    `rules` is the rows' rule set, which the advised rebuild keeps."""

    conversation: str
    version: int
    differs: tuple[str, ...] = ()
    problem: str | None = None
    rules: str | None = None

    @property
    def ok(self) -> bool:
        """Returns True when the rows are the fold of the log."""
        return not self.differs and self.problem is None

    def line(self) -> str:
        """Returns the verdict as one line of text."""
        if self.problem is not None:
            return f"{self.conversation}: rows not checked: {self.problem}"
        if self.ok:
            return f"{self.conversation}: rows ok at version {self.version}"
        return (
            f"{self.conversation}: rows differ from the fold of its log at version {self.version} "
            f"({', '.join(self.differs)}); run: chatrecord rebuild" + (f" --rules {self.rules}" if self.rules else "")
        )

    def to_json(self) -> dict[str, Any]:
        """Returns `{"conversation", "rows_ok", "version", "differs", "problem"}`."""
        return {
            "conversation": self.conversation,
            "rows_ok": self.ok,
            "version": self.version,
            "differs": list(self.differs),
            "problem": self.problem,
        }


def check_rows(models: ReadModels, conversation: str) -> RowsVerdict:
    """Returns the verdict of one conversation's rows. Reads the whole log, so costs grow with history.
    Raises UnknownConversation for a conversation the store does not hold."""
    summary, rules, stored = models.snapshot(conversation)
    try:
        events = models.store.events(conversation, up_to_version=summary.version)
    except ChatrecordError as error:  # an unreadable event: the chain's verdict says more
        return RowsVerdict(summary.conversation or conversation, summary.version, problem=str(error))
    fresh = MemoryRows(MemoryConversation())
    folded = fold_into(fresh, None, events, resolve(rules))
    if folded is None:
        return RowsVerdict(summary.conversation or conversation, summary.version, PARTS, rules=rules)
    fold = _state(fresh, folded)
    # a summary an earlier version wrote keeps no last_at (the list's table needs a rebuild) and
    # no count of user messages: not a difference; nor the count of its folds in place (an erasure's)
    expected = folded.model_copy(
        update={
            "refolds": summary.refolds,
            **({"last_at": None} if summary.last_at is None else {}),
            **({"users": None} if summary.users is None else {}),
            # nor the list's status facts (owner, failed and undecided counts, erased), which
            # an earlier version's summary keeps none of (`failed` None) until a rebuild
            **(
                {"owner": summary.owner, "failed": None, "undecided": summary.undecided, "erased": summary.erased}
                if summary.failed is None
                else {}
            ),
        }
    )
    differs = [
        part
        for part, same in (
            ("head", summary.model_dump() == expected.model_dump()),
            ("transcript", stored.transcript == fold.transcript),
            ("run record", [e.to_json() for e in stored.record.entries] == [e.to_json() for e in fold.record.entries]),
            ("card outcomes", stored.outcomes.outcomes == fold.outcomes.outcomes),
        )
        if not same
    ]
    return RowsVerdict(summary.conversation or conversation, summary.version, tuple(differs), rules=rules)


def rows_verdicts(models: ReadModels, conversations: Iterable[str]) -> Iterator[RowsVerdict]:
    """Yields `check_rows` of each conversation, one at a time (memory holds one log)."""
    for conversation in conversations:
        try:
            yield check_rows(models, conversation)
        except ChatrecordError as error:
            yield RowsVerdict(conversation, 0, problem=str(error))


__all__ = ["PARTS", "RowsVerdict", "check_rows", "rows_verdicts"]
