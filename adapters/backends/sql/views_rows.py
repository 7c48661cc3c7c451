"""One conversation's rows in a generation's tables (`adapters.backends.sql.views_tables`), read and
written in SQL inside a transaction the caller holds (`SQLRows`), and the signal of a read
whose rows moved under it (`ReadMoved`).
"""

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
from projections.summary_rows import Summary, TurnMark
from projections.run_record import Entry
from projections.transcript import Message
from projections.usage import UsageRow

_ENTRIES = TypeAdapter(tuple[Entry, ...])


class SQLRows(ViewRows):
    """One conversation's rows in a generation, read and written through `curs` (a cursor of
    an open transaction). `p` is the driver's placeholder (`?` or `%s`). With `texts`, a
    transcript message's text is kept sealed with the conversation's data key (`ViewTexts`):
    its body holds `sealed` instead of `text`."""

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
        """Returns the JSON body a message's row keeps: its text sealed where `texts` is set
        (by `seal`, `texts.sealer(cid)`, when given: one key lookup for many rows)."""
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
        """Returns the messages of row bodies, in order (plain bodies decoded in one call).
        With `kept`, a body decoded before is not again (nor its text opened), while the
        conversation's texts are readable; the others are kept there."""
        if kept is None:
            return self._decode(bodies)
        return decode_kept_messages(bodies, self.texts, self.cid, kept)

    def _decode(self, bodies: Sequence[str]) -> tuple[Message, ...]:
        return decode_messages(bodies, self.texts, self.cid)

    def _blocks(self, numbers: set[int]) -> tuple[str, tuple[Any, ...]]:
        """Returns a query of `(idx, number, block_end)` of the user messages `numbers` and its
        arguments (an `IN` list, which SQLite looks up in the `(cid, number, idx)` index)."""
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
        """The key under which the entries set aside (`set_aside`) are kept in the entries
        table: no read of the conversation's rows (by its `cid`) finds them."""
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
        """Returns, in one statement, what the latest turn saw (`projections.row_head.Head.turn_intact`):
        the first `length` transcript messages, the entries set aside for it and those kept of
        versions up to `version` (oldest first), and the card outcomes recorded up to `version`.
        With `kept` and `rendered` (the process's caches) as `decode_turn_bodies` takes them."""
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
        """Returns the kept run record entries, oldest first: decoded in one call, or with
        `decode` (a body's JSON to its entry) each when first asked for (`LazyEntries`). With
        `decode`, `newest` and `total` (how many are kept: the summary's `seqs`), only the newest
        `newest` are read at first, the older ones when one of them is first asked for (in the
        caller's transaction); should they not be `total` in all, raises ReadMoved."""
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
        """Deletes the card outcomes of `cards` and those of no card at or after transcript
        position `length`; returns how many went. Counted from the rows each DELETE returns,
        not the cursor's rowcount, which psycopg's pipeline mode (an append in one round trip)
        does not know yet."""
        removed = 0
        for card in sorted(cards):
            removed += len(self._q(self.s.cut_card, card).fetchall())
        return removed + len(self._q(self.s.cut_loose, length).fetchall())

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        """Returns the card outcomes, oldest first; only the `newest` ones if given; each body
        decoded by `decode` if given."""
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
        """Returns, for each user message number, the index of the user message after it (None
        when its block runs to the end); a number with no message is left out (one statement)."""
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
        """Returns `(messages_at, block_ends)` for placing a turn's notes in a transcript of
        `length` messages: `block_ends` reads, in the same statement, the messages on both
        sides of each block's end (where a note goes), so `messages_at` asks the database only
        for what that statement did not bring (a note placed by position). With `kept`, each
        message is decoded once per row body (`_decode_messages`). With `known` (what is known
        of these rows already: `adapters.views.caches.BlocksCache`), neither asks the
        database for what it holds, nor decodes a message it holds decoded; whatever they read
        is added to it."""
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
        """As `ViewRows.turn_starts`: one statement, a second only when `message` started no
        turn; each a range of the `turns` table's primary key."""
        versions = tuple(int(row["version"]) for row in self._q(self.s.turn_versions, message).fetchall())
        if versions:
            return versions, ()
        rows = self._q(self.s.turn_messages).fetchall()
        return (), tuple(int(row["message"]) for row in rows)
