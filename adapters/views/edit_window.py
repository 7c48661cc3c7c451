"""What an edit's fold asks of a conversation's stored rows, as this process's appends left them
(`EditWindow`). Kept with the summary (`WrittenRowsCache.edit`), it lets an edit's append on PostgreSQL
read nothing before its call (`ViewRows.prefetch`)."""

from __future__ import annotations

from collections.abc import Iterable

from projections.summary_rows import Summary
from projections.transcript import Message


class EditWindow:
    """Per conversation, what the fold of an edit reads of the stored rows, followed write by write.

    `BufferedRows` calls the `put_*`, `drop_*` and `cut_*` methods; `start` gives an exact state. Each
    part holds a window of the newest rows and says where it begins. A question beyond the window answers
    None; then the rows are read.
    - `users`: numbered transcript messages from index `users_from` on (None: unknown), without text.
    - `born`, `live`: segments returned from version `since` on, with their entry's `seq`, and which
      entries are kept.
    - `outcomes`: card outcomes from version `since` on, as (card, after) by (version, place). A card's
      outcomes all follow its segment, so those of a card in `born` are all here. `loose_below`: outcomes
      of no card before `since` lie before this position (None: unknown).
    - `pages`: page changes from message `pages_from` on (None: unknown); `below`: the newest page and
      newest non-zero page before it.

    Bounded: each part keeps at most `LIMIT` (32) rows (`trim`). Valid as long as the summary it was kept
    with."""

    LIMIT = 32

    def __init__(self, users_from: int | None, since: int, loose_below: int | None, pages_from: int | None) -> None:
        self.users_from = users_from
        self.users: dict[int, Message] = {}
        self.since = since
        self.born: dict[str, int] = {}
        self.live: set[int] = set()
        self.outcomes: dict[tuple[int, int], tuple[str | None, int]] = {}
        self.loose_below = loose_below
        self.pages_from = pages_from
        self.pages: dict[int, int] = {}
        self.below: tuple[int | None, int] = (None, 0)

    @classmethod
    def start(cls, summary: Summary | None) -> EditWindow:
        """Returns what is known of a conversation's rows whose summary is `summary` (None: no rows yet).
        Known: no numbered message from index `summary.length` on, no entry or outcome of a later
        version, and no outcome at all when `summary.outcomes` is 0. Page changes are unknown, except
        where the last event put no message."""
        if summary is None:
            return cls(0, 0, 0, 0)
        pages = 0 if summary.version <= 1 and summary.length == 0 else None
        return cls(summary.length, summary.version + 1, 0 if summary.outcomes == 0 else None, pages)

    def copy(self) -> EditWindow:
        """Returns a copy that follows its own writes (an append that fails leaves this one as it was)."""
        other = EditWindow(self.users_from, self.since, self.loose_below, self.pages_from)
        other.users, other.born, other.live = dict(self.users), dict(self.born), set(self.live)
        other.outcomes, other.pages, other.below = dict(self.outcomes), dict(self.pages), self.below
        return other

    # ------------------------------------------------------------ following the writes

    def put_message(self, index: int, message: Message) -> None:
        if self.users_from is None:
            return
        if index == self.users_from - 1:
            self.users_from = index  # every numbered message from it on is known again
        elif index < self.users_from:
            return
        if message.number is not None:
            self.users[index] = message
        else:
            self.users.pop(index, None)

    def cut_messages(self, keep: int) -> None:
        self.users = {i: m for i, m in self.users.items() if i < keep}
        self.users_from = keep if self.users_from is None else min(self.users_from, keep)

    def put_entry(self, seq: int, segment: str) -> None:
        if seq >= self.since:
            self.born[segment] = seq
            self.live.add(seq)

    def drop_entries(self, seqs: Iterable[int]) -> None:
        self.live.difference_update(seqs)

    def put_outcome(self, seq: tuple[int, int], card: str | None, after: int) -> None:
        if seq[0] >= self.since:
            self.outcomes[seq] = (card, after)
        else:  # not the fold's (it records an outcome at the event's own version): not followed
            self.loose_below = None

    def cut_outcomes(self, cards: set[str], length: int) -> None:
        """The outcomes of `cards` and those of no card at or after `length` were deleted."""
        self.outcomes = {k: (c, a) for k, (c, a) in self.outcomes.items() if not (c in cards if c is not None else a >= length)}
        self.loose_below = length if self.loose_below is None else min(self.loose_below, length)

    def put_page(self, message: int, page: int) -> None:
        if self.pages_from is None:
            return
        if message >= self.pages_from:
            self.pages[message] = page
        else:
            self.pages_from = None  # a change among those `below` sums up

    def cut_pages(self, after: int, newest: int | None, shown: int) -> None:
        """The page changes after message `after` were deleted. `newest`, `shown`: the newest page and
        newest non-zero page kept (`Rows.cut_pages`)."""
        if self.pages_from is not None and after + 1 >= self.pages_from:
            self.pages = {m: p for m, p in self.pages.items() if m <= after}
        else:
            self.pages_from, self.pages, self.below = after + 1, {}, (newest, shown)

    def trim(self) -> None:
        """Keeps at most `LIMIT` rows of each part, messages without text; called at the end of an append."""
        if len(self.users) > self.LIMIT:  # sorted only when over: an append adds one or two
            users = sorted(self.users)[-self.LIMIT :]
            self.users_from = users[0]
            self.users = {i: self.users[i] for i in users}
        for i, message in self.users.items():  # a key's value replaced: the dict's size stays
            if message.text != "":
                self.users[i] = self._textless(message)
        cut = self.since
        if len(self.born) > self.LIMIT:
            cut = max(cut, sorted(self.born.values())[-self.LIMIT])
        versions = sorted(v for v, _ in self.outcomes) if len(self.outcomes) > self.LIMIT else []
        if len(versions) > self.LIMIT:
            at = versions[-self.LIMIT]
            cut = max(cut, at if sum(1 for v in versions if v >= at) <= self.LIMIT else at + 1)
        if cut > self.since:
            for (v, _), (card, after) in self.outcomes.items():
                if v < cut and card is None and self.loose_below is not None:
                    self.loose_below = max(self.loose_below, after + 1)
            self.outcomes = {k: o for k, o in self.outcomes.items() if k[0] >= cut}
            self.born = {s: v for s, v in self.born.items() if v >= cut}
            self.live = {v for v in self.live if v >= cut}
            self.since = cut
        if len(self.pages) > self.LIMIT:
            marks = sorted(self.pages)
            newest, shown = self.below
            for m in marks[: -self.LIMIT]:
                newest = self.pages.pop(m)
                shown = newest if newest != 0 else shown
            self.below, self.pages_from = (newest, shown), marks[-self.LIMIT]

    @staticmethod
    def _textless(message: Message) -> Message:
        return message if message.text == "" else message.model_copy(update={"text": ""})

    # ------------------------------------------------------------ answering

    def user_index(self, number: int) -> int | None:
        """The index of user message `number` (the greatest), None when it is not in the window."""
        found = [i for i, m in self.users.items() if m.number == number]
        return max(found) if found else None

    def entry_seq(self, segment: str, seqs: tuple[int, ...]) -> tuple[bool, int | None]:
        """Whether the window knows the kept entry of `segment`, and its version (None: none kept). `seqs`:
        the kept entries' versions."""
        seq = self.born.get(segment)
        if seq is not None:
            return True, (seq if seq in self.live else None)
        return all(s >= self.since for s in seqs), None  # none older is kept: it has none

    def cut_count(self, cards: set[str], length: int) -> int | None:
        """How many outcomes a cut of `cards` at transcript length `length` deletes
        (`card_outcomes.is_cut`). None when not all are in the window."""
        if self.loose_below is None or length < self.loose_below or any(c not in self.born for c in cards):
            return None
        return sum(1 for card, after in self.outcomes.values() if (card in cards if card is not None else after >= length))

    def pages_at(self, number: int) -> tuple[int | None, int] | None:
        """The newest page and newest non-zero page (0: none) at or before message `number`. None when the
        window does not reach back far enough."""
        if self.pages_from is None or number + 1 < self.pages_from:
            return None
        newest, shown = self.below
        for m in sorted(self.pages):
            if m <= number:
                newest = self.pages[m]
                shown = newest if newest != 0 else shown
        return newest, shown
