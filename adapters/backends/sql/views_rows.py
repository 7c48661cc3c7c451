"""One conversation's rows in a generation's tables, read and written in SQL in the caller's transaction
(`SQLRows`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from pydantic import TypeAdapter

from adapters.backends.sql.views_statements import RowStatements
from adapters.backends.sql.views_tables import LISTING, MESSAGE_COLUMNS, USAGE, aside_cid
from adapters.store.crypto import ERASED, ViewTexts
from adapters.views.caches import MESSAGE_BODY, MessagesCache, NotesCache, PlacementCache
from adapters.views.listing import listing_values
from adapters.views.ports import ReadMoved, ViewRows
from adapters.views.row_bodies import LazyEntries, decode_kept_messages, decode_messages, decode_turn_bodies, only_erased
from adapters.views.usage_rows import usage_values
from projections.card_outcomes import CardOutcome
from projections.run_record import Entry
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Message
from projections.usage import UsageRow

_ENTRIES = TypeAdapter(tuple[Entry, ...])


class SQLRows(ViewRows):
    """One conversation's rows in a generation, through `curs` in an open transaction. `p` is the
    placeholder (`?` or `%s`). With `texts`, message texts are sealed with the data key; the body holds
    `sealed` instead of `text`."""

    tip: bytes | None = None
    """The hash chain's hash at the summary's version, when the read that made these rows took it
    (`TurnRows.tip`): what a read kept of this version is kept under."""

    def __init__(
        self,
        curs: Any,
        tables: dict[str, str],
        cid: str,
        p: str,
        texts: ViewTexts | None = None,
        statements: RowStatements | None = None,
    ) -> None:
        self.curs, self.cid, self.p, self.t, self.texts = curs, cid, p, tables, texts
        self.s = statements if statements is not None else RowStatements(tables, p)
        """The statements, built once per generation by the storage (`SQLViewStorage.rows`)."""

    def _message_body(self, message: Message, seal: Callable[[str], str | None] | None = None) -> str:
        """Returns a message row's JSON body, its text sealed where `texts` is set (by `seal` when given)."""
        if self.texts is None:
            return message.model_dump_json()
        body = dict(message.__dict__)  # model_dump(mode="json") of its str, int and tuple fields, cheaper (docs/benchmarks.md)
        text = body.pop("text")
        sealed = (seal or self.texts.sealer(self.cid))(text)
        if sealed is None:  # the key was erased: no text is kept, but the log's fold reads as kept
            body["text"] = text if only_erased(text) else ERASED
        else:
            body["sealed"] = sealed
        return orjson.dumps(body).decode()

    def _decode_messages(self, bodies: Sequence[str], kept: MessagesCache | None = None) -> tuple[Message, ...]:
        """Returns the messages of row bodies, in order. With `kept`, a body decoded before is reused while
        texts are readable; new ones are kept."""
        if kept is None:
            return self._decode(bodies)
        return decode_kept_messages(bodies, self.texts, self.cid, kept)

    def _decode(self, bodies: Sequence[str]) -> tuple[Message, ...]:
        return decode_messages(bodies, self.texts, self.cid)

    def _blocks(self, numbers: set[int]) -> tuple[str, tuple[Any, ...]]:
        """Returns a query of `(idx, number, block_end)` for user messages `numbers`, with its arguments (an
        `IN` list)."""
        return self.s.blocks(len(numbers)), (self.cid, *sorted(numbers))

    def _select(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs a read and returns the cursor."""
        self.curs.execute(sql, args)
        return self.curs

    def _q(self, sql: str, *args: Any) -> Any:
        """Runs `sql` with the conversation's `cid` first and returns the cursor."""
        self.curs.execute(sql, (self.cid, *args))
        return self.curs

    def clear(self) -> None:
        """Deletes every row of the conversation."""
        for statement in self.s.clear:
            self._q(statement)
        SQLRows.drop_aside(self)

    @property
    def aside_cid(self) -> str:
        """The key of the entries set aside (`set_aside`); no read by the conversation's `cid` finds them."""
        return aside_cid(self.cid)

    # ---------------------------------------------------------------- summary

    def summary(self) -> Summary | None:
        """Returns the conversation's summary, None before its first event."""
        row = self._q(self.s.summary).fetchone()
        return Summary.model_validate_json(row["body"]) if row else None

    def put_summary(self, summary: Summary) -> None:
        self._q(
            self.s.insert("heads"),
            summary.version,
            summary.model_dump_json(),
        )
        if self.s.listing is not None:  # the list's row, where the generation has the table
            self._q(self.s.insert(LISTING.name), *listing_values(summary))

    # ---------------------------------------------------------------- run record

    def entry(self, segment: str) -> Entry | None:
        row = self._q(self.s.entry, segment).fetchone()
        return Entry.model_validate_json(row["body"]) if row else None

    def entry_seq(self, segment: str) -> int | None:
        row = self._q(self.s.entry_seq, segment).fetchone()
        return int(row["seq"]) if row else None

    def put_entry(self, entry: Entry) -> None:
        self._q(
            self.s.insert("entries"),
            entry.seq,
            entry.segment,
            entry.model_dump_json(),
        )

    def delete_entries(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self._q(self.s.delete_entry, seq)

    def set_aside(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self._select(self.s.set_aside, (self.aside_cid, self.cid, seq))

    def drop_aside(self) -> None:
        self._select(self.s.delete_entries, (self.aside_cid,))

    def turn_rows(
        self, length: int, version: int, kept: MessagesCache | None = None, rendered: NotesCache | None = None
    ) -> tuple[tuple[Message, ...], tuple[Entry, ...], tuple[CardOutcome, ...]]:
        """Returns in one statement what the latest turn saw (`Summary.turn_intact`). The first `length`
        messages, the entries set aside and those up to `version` (oldest first), and the card outcomes
        up to `version`. `kept` and `rendered` as `decode_turn_bodies` takes them."""
        rows = self._select(
            self.s.turn_rows,
            (self.cid, length, self.cid, version, self.aside_cid, self.cid, version),
        ).fetchall()
        bodies: tuple[list[str], list[str], list[str]] = ([], [], [])
        for r in rows:
            bodies[int(r["k"])].append(r["body"])
        return decode_turn_bodies(*bodies, self.texts, self.cid, kept, rendered)

    def aside(self) -> tuple[Entry, ...]:
        """Returns the entries set aside for the latest turn, oldest first."""
        rows = self._select(self.s.entries, (self.aside_cid,)).fetchall()
        return _ENTRIES.validate_json("[" + ",".join(r["body"] for r in rows) + "]")

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> Sequence[Entry]:
        """Returns the kept entries, oldest first: decoded in one call, or on first access with `decode`.
        With `decode`, `newest` and `total`, only the newest are read first; older ones when reached.
        Raises ReadMoved when they are not `total` in all."""
        if decode is not None and newest is not None and total is not None and total > newest:
            rows = self._q(self.s.newest_entries, newest).fetchall()[::-1]
            if not rows:
                raise ReadMoved(f"the head of {self.cid} keeps {total} entries, its rows none")

            def older() -> list[str]:
                before = self._q(self.s.older_entries, rows[0]["seq"]).fetchall()
                if len(before) != total - len(rows):
                    raise ReadMoved(f"the head of {self.cid} keeps {total} entries, its rows {len(before) + len(rows)}")
                return [r["body"] for r in before]

            return LazyEntries([r["body"] for r in rows], decode, total, older)
        rows = self._q(self.s.entries).fetchall()
        if decode is not None:
            return LazyEntries([r["body"] for r in rows], decode)
        return _ENTRIES.validate_json("[" + ",".join(r["body"] for r in rows) + "]")

    # ---------------------------------------------------------------- card outcomes

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        for o in outcomes:
            self._q(
                self.s.insert("outcomes"),
                o.seq[0],
                o.seq[1],
                o.card,
                o.after,
                o.model_dump_json(),
            )

    def cut_outcomes(self, cards: set[str], length: int) -> int:
        """Deletes the outcomes of `cards` and card-less ones at or after position `length`; returns how
        many. Counted from the DELETEs' returned rows; pipeline mode knows no rowcount yet."""
        removed = 0
        for card in sorted(cards):
            removed += len(self._q(self.s.cut_card, card).fetchall())
        return removed + len(self._q(self.s.cut_loose, length).fetchall())

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        """Returns the card outcomes, oldest first; only the `newest` if given; decoded by `decode` if
        given."""
        if newest is None:
            rows = self._q(self.s.outcomes).fetchall()
        else:
            rows = self._q(self.s.newest_outcomes, newest).fetchall()[::-1]
        return tuple((decode or CardOutcome.model_validate_json)(r["body"]) for r in rows)

    # ---------------------------------------------------------------- transcript

    def message(self, index: int) -> Message | None:
        row = self._q(self.s.message, index).fetchone()
        return self._decode_messages([row["body"]])[0] if row else None

    def user_index(self, number: int) -> int | None:
        row = self._q(self.s.user_index, number).fetchone()
        return int(row["idx"]) if row and row["idx"] is not None else None

    def messages_at(self, indexes: set[int], kept: MessagesCache | None = None) -> dict[int, Message]:
        """Returns the transcript messages at `indexes` (one statement); `kept` as in
        `_decode_messages`."""
        bodies = self._bodies_at(indexes)
        return dict(zip(bodies, self._decode_messages(list(bodies.values()), kept), strict=True))

    def _bodies_at(self, indexes: set[int] | list[int]) -> dict[int, str]:
        """Returns the row bodies of the transcript messages at `indexes` there are (one statement)."""
        if not indexes:
            return {}
        rows = self._q(self.s.bodies_at(len(indexes)), *sorted(indexes)).fetchall()
        return {int(r["idx"]): r["body"] for r in rows}

    def block_ends(self, numbers: set[int]) -> dict[int, int | None]:
        """Returns per user message number the index of the next user message (None: to the end). A number
        without a message is left out. One statement."""
        if not numbers:
            return {}
        rows = self._q(self.s.blocks(len(numbers)), *sorted(numbers)).fetchall()
        found: dict[int, int | None] = {}
        for r in sorted(rows, key=lambda r: r["idx"]):  # the newest message of a number wins
            found[int(r["number"])] = None if r["block_end"] is None else int(r["block_end"])
        return found

    def block_end(self, number: int) -> int | None:
        """Returns the index of the user message after user message `number` (None: none)."""
        return self.block_ends({number}).get(number)

    def placement_reads(
        self, length: int, kept: MessagesCache | None = None, known: PlacementCache | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """Returns `(messages_at, block_ends)` for placing a turn's notes in a transcript of `length`
        messages. `block_ends` also reads the messages on both sides of each block's end. `messages_at`
        reads only what that missed. With `kept`, each message is decoded once per body. With `known`
        (`BlocksCache`), what it holds is not read again; what is read is added."""
        known = known if known is not None else PlacementCache()
        bodies, ends = known.bodies, known.ends

        def block_ends(numbers: set[int]) -> dict[int, int | None]:
            known.numbers.update(numbers)
            missing = {n for n in numbers if n not in ends}
            if missing:
                blocks, args = self._blocks(missing)  # each position its own lookup (`RowStatements.placement`)
                rows = self._select(self.s.placement(blocks), (*args, length, length, self.cid)).fetchall()
                ends.update(dict.fromkeys(missing))  # no message of the number: None
                for r in sorted((r for r in rows if r["k"] == 0), key=lambda r: r["idx"]):  # the newest wins
                    ends[int(r["number"])] = (int(r["idx"]), None if r["block_end"] is None else int(r["block_end"]))
                bodies.update((int(r["idx"]), r["body"]) for r in rows if r["k"] == 1 and r["body"] is not None)
            return {n: end[1] for n in numbers if (end := ends.get(n)) is not None}

        def messages_at(indexes: set[int]) -> dict[int, Message]:
            known.asked.update(indexes)
            found = {i: message for i in indexes if (message := known.messages.get(i)) is not None}
            bodies.update(self._bodies_at([i for i in indexes if i not in found and i not in bodies]))
            have = sorted(i for i in indexes if i not in found and i in bodies)
            for i, message in zip(have, self._decode_messages([bodies[i] for i in have], kept), strict=True):
                found[i] = message
                if len(bodies[i]) <= MESSAGE_BODY:
                    known.messages[i] = message
            return found

        return messages_at, block_ends

    def put_message(self, index: int, message: Message) -> None:
        self._q(
            self.s.insert("messages", MESSAGE_COLUMNS),  # block_end: NULL when new, else kept
            index,
            message.role,
            message.number,
            self._message_body(message),
        )

    def end_block(self, index: int, end: int | None) -> None:
        self.curs.execute(self.s.end_block, (end, self.cid, index))

    def cut_messages(self, keep: int) -> None:
        self._q(self.s.cut_messages, keep)

    def messages(self) -> tuple[Message, ...]:
        """Returns the whole transcript, in order."""
        rows = self._q(self.s.messages).fetchall()
        return self._decode_messages([r["body"] for r in rows])

    # ---------------------------------------------------------------- view context, turns

    def put_page(self, message: int, page: int) -> None:
        self._q(
            self.s.insert("pages"),
            message,
            page,
        )

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        self._q(self.s.cut_pages, after)
        newest = self._q(self.s.newest_page).fetchone()
        shown = self._q(self.s.shown_page).fetchone()
        return (int(newest["page"]) if newest else None), (int(shown["page"]) if shown else 0)

    def put_usage(self, usage: UsageRow) -> None:
        if self.s.usage is not None:  # where the generation has the table
            self._q(self.s.insert(USAGE.name), *usage_values(usage))

    def put_turn(self, turn: TurnMark) -> None:
        self._q(
            self.s.insert("turns"),
            turn.version,
            turn.message,
            turn.at.isoformat(),
        )

    def turn_starts(self, message: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """As `ViewRows.turn_starts`: one statement, a second only when `message` started no turn."""
        versions = tuple(int(row["version"]) for row in self._q(self.s.turn_versions, message).fetchall())
        if versions:
            return versions, ()
        rows = self._q(self.s.turn_messages).fetchall()
        return (), tuple(int(row["message"]) for row in rows)
