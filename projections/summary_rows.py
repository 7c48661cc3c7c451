"""A conversation's read models as rows, as the fold sees them: its summary and its rows. `Summary` is
the bounded bookkeeping, one row per conversation. What grows with the history lives in rows behind
`Rows`. `projections.row_fold.apply_to_rows` applies an event through them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal, Protocol

from domain.values import Immutable, assembled
from projections.card_outcomes import Approval, CardOutcome, OpenCard
from projections.run_record import Entry, PendingApproval
from projections.steps import LastDecision
from projections.transcript import Message
from projections.usage import UsageRow
from projections.view_context import ViewContext


class TurnMark(Immutable):
    """The latest model call a user message started: `message`, its time, its event's version."""

    message: int
    at: datetime
    version: int
    length: int = 0
    """The transcript's length in messages after that event."""
    dropped: int = 0
    """How many entries had fallen out of the run record after that event."""


class Summary(Immutable):
    """A conversation's bounded state in the row read models (one row per conversation)."""

    conversation: str = ""
    """The conversation's id as the chat names it."""
    version: int = 0
    """The version of the last event applied: each event is applied once, in order."""
    kind: Literal["chat", "alt_text"] = "chat"
    """The conversation's kind; an `alt_text` conversation gets no notes."""
    seqs: tuple[int, ...] = ()
    """The versions of the run record entries kept, oldest first (at most `record_entries`)."""
    dropped: int = 0
    """How many entries fell out of the run record."""
    follow: LastDecision | None = None
    """The decision or answer the next continuation follows."""
    open_waits: dict[str, str | None] = {}
    """Each segment whose card or question waits: its run (a guided card) or None."""
    pending: PendingApproval | None = None
    """An approved guided card whose outcome its continuation has still to bring."""
    outcomes: int = 0
    """How many card outcomes are kept."""
    open_cards: dict[str, OpenCard] = {}
    """The waiting cards of a guided process, by segment."""
    approval: Approval | None = None
    """The approved guided card awaiting its continuation (its calls, for their outcomes)."""
    length: int = 0
    """The transcript's length in messages."""
    last_role: Literal["user", "assistant"] | None = None
    """The role of the transcript's last message."""
    last_user: int | None = None
    """The index of the transcript's last user message."""
    page_id: int = 0
    """The page of the latest turn (0: none)."""
    last_page_id: int = 0
    """The last page selected in the conversation (kept for a turn sent with page 0)."""
    last_change: int | None = None
    """The page of the newest page change (None before one)."""
    turn: TurnMark | None = None
    """The latest model call a user message started."""
    edited: int | None = None
    """The message an edit just changed (its truncation starts a turn)."""
    turn_intact: bool = False
    """Whether the rows still hold the read models as the latest turn saw them: since it
    started only `KEEPS_TURN` events came, none changed a row that turn saw (an entry, a
    message) and none cut one. Then that turn's input is built from the rows
    (`turn_rows_state`): its transcript the first `turn.length` messages, its record the
    entries of versions up to `turn.version` (with those set aside), its card outcomes those
    recorded up to `turn.version`."""
    turn_kept: tuple[int, ...] = ()
    """The versions of the entries the latest turn saw that have since fallen out of the run
    record: set aside (`Rows.set_aside`) until the next turn starts (`Rows.drop_aside`)."""
    last_at: int | None = None
    """The time of the last event the chat stamped (an erasure, stamped when it ran, is not
    activity), in microseconds since 1970-01-01 UTC: the
    conversation's last activity, by which the summaries are listed newest first (an index on it,
    `adapters.backends.sql.views_tables.create_statements`). None in a summary an earlier version wrote."""
    users: int | None = None
    """How many user messages the transcript holds (those of the conversation no edit cut,
    whatever their numbers), as `chatrecord list` shows them: kept by the fold, so the list
    reads it with the summary. None in a summary an earlier version wrote (and while it folds on, until
    a replaced transcript or a rebuild counts them again)."""
    owner: int | None = None
    """The backend user id of the conversation's owner (None in a summary an earlier version wrote)."""
    failed: int | None = None
    """How many segments were recorded failed (`projections.row_fold.segment_failed`: an
    outcome that is neither completed nor waiting, or a call read as failed), an edit's cut ones
    still counted; None in a summary an earlier version wrote (until a rebuild counts them)."""
    undecided: int | None = None
    """How many cards or questions were left undecided; None in a summary an earlier version wrote."""
    erased: bool = False
    """Whether the conversation's erasure was recorded."""
    refolds: int = 0
    """How many times these rows were folded again from the log in place, at a version an
    earlier fold had reached (`adapters.views.live_rows.LiveRows.erase`: the rows then hold the
    texts as erased); a process that kept what it read of the rows at this version reads them
    again. Not a fact of the log: a rebuild starts it at 0."""

    @property
    def waiting(self) -> int:
        """How many cards or questions wait for the editor (`open_waits`)."""
        return len(self.open_waits)

    @property
    def view(self) -> ViewContext:
        """Returns the view context (pageId, lastPageId)."""
        return ViewContext(page_id=self.page_id, last_page_id=self.last_page_id)


def _changed(summary: Summary, update: dict[str, object]) -> Summary:
    """Returns `summary.model_copy(update=update)`, not validated, without pydantic's per-attribute
    copy. A summary has no extra fields and no private attributes."""
    fields = summary.__dict__.copy()
    fields.update(update)
    return assembled(Summary, fields, summary.__pydantic_fields_set__.union(update))


class Rows(Protocol):
    """The row tables of one conversation, as the fold reads and writes them."""

    def entry(self, segment: str) -> Entry | None:
        """Returns the kept run record entry of `segment`, None if there is none."""

    def entry_seq(self, segment: str) -> int | None:
        """Returns the version (`seq`) of the kept entry of `segment`, None if there is none."""

    def put_entry(self, entry: Entry) -> None:
        """Inserts or replaces the entry of version `entry.seq`."""

    def delete_entries(self, seqs: Iterable[int]) -> None:
        """Deletes the entries of these versions."""

    def set_aside(self, seqs: Iterable[int]) -> None:
        """Takes these versions' entries out of the run record, kept aside for the latest turn until
        `drop_aside`."""

    def drop_aside(self) -> None:
        """Deletes the entries set aside."""

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        """Appends card outcomes (keyed by `index`)."""

    def cut_outcomes(self, cards: set[str], length: int) -> int:
        """Deletes the outcomes `card_outcomes.is_cut` names; returns how many."""

    def message(self, index: int) -> Message | None:
        """Returns transcript message `index`, None past the end."""

    def user_index(self, number: int) -> int | None:
        """Returns the index of user message `number`, None if the transcript has none."""

    def put_message(self, index: int, message: Message) -> None:
        """Inserts or replaces transcript message `index` (its block end unset)."""

    def end_block(self, index: int, end: int | None) -> None:
        """Records the next user message's index after the one at `index`; None runs to the end."""

    def cut_messages(self, keep: int) -> None:
        """Deletes the transcript messages from index `keep` on."""

    def put_page(self, message: int, page: int) -> None:
        """Records that typed message `message` changed the page to `page`."""

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        """Deletes page changes after message `after`. Returns the newest kept page (None when none)
        and the newest non-zero one (0 when none)."""

    def put_turn(self, turn: TurnMark) -> None:
        """Records a model call a user message started."""

    def put_usage(self, usage: UsageRow) -> None:
        """Inserts or replaces the usage row of the segment of version `usage.seq`."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(at: datetime) -> int:
    """Returns `at` (aware) as whole microseconds since 1970-01-01 UTC."""
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
