"""One conversation's rows with their writes held until a flush sends one bulk statement per table
(`BufferedRows`). `StatementRows` sends them as statements on both databases. The newest rows written are
kept for the next append (`WrittenRowsCache`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from adapters.backends.sql.views_rows import SQLRows
from adapters.backends.sql.views_statements import RowStatements
from adapters.backends.sql.views_tables import MESSAGE_COLUMNS, ROW_TABLES, USAGE
from adapters.store.crypto import ViewTexts
from adapters.views.edit_window import EditWindow
from adapters.views.ports import Appended
from adapters.views.recent_rows import WrittenRowsCache
from adapters.views.usage_rows import usage_values
from projections.card_outcomes import CardOutcome
from projections.run_record import Entry
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Message
from projections.usage import UsageRow


class BufferedRows(SQLRows, ABC):
    """`SQLRows` that holds its writes until `flush`, one bulk statement per table. Reads see held writes
    first. A transcript cut (`cut_messages`) is held as an index and written at the flush, before the
    held messages. Other cuts flush first, then run at once. Held rows are kept as statement values, not
    models. Only the newest entry and message stay models until another is put."""

    def __init__(
        self,
        curs: Any,
        tables: dict[str, str],
        cid: str,
        p: str,
        texts: ViewTexts | None = None,
        statements: RowStatements | None = None,
    ) -> None:
        super().__init__(curs, tables, cid, p, texts, statements)
        self._entries: dict[int, Entry | tuple[str, str] | None] = {}  # seq: entry, (segment, body), None: deleted
        self._segments: dict[str, int | None] = {}
        self._outcomes: list[tuple[Any, ...]] = []
        self._messages: dict[int, Message | tuple[str, int | None, str]] = {}  # index: message, (role, number, body)
        self._ends: dict[int, int | None] = {}
        self._cut: int | None = None  # the stored messages from this index on are deleted at the flush
        self._pages: dict[int, int] = {}
        self._turns: list[tuple[int, int, str]] = []
        self._usage: list[tuple[Any, ...]] = []
        self._summary: Summary | None = None
        self.summary_json: str | None = None  # the JSON of the summary the last flush wrote, where the backend made it here
        self.bodies: list[tuple[str, str, Entry | CardOutcome]] = []
        """The entries and card outcomes written, each with its body: ("entry" or "outcome", body, item)."""
        self.message_bodies: list[tuple[str, Message]] = []
        """The transcript messages written whose body reads back as the message (none erased), with it."""
        self._drop_aside = False  # the entries set aside before are deleted at the flush
        self._moves: list[int] = []  # stored entries to set aside at the flush
        self._aside: list[tuple[int, str, str]] = []  # held entries set aside: (seq, segment, body)
        self._known: WrittenRowsCache | None = None  # the newest rows as the last append left them (`prime`)
        self._window: EditWindow | None = None  # what an edit's fold reads, followed from `prime`
        self._start: Summary | None = None  # the summary the append's fold starts from (`prime`)
        self._length: int | None = None  # the transcript's length in the summary the last flush wrote
        self._cut_seen = False  # whether a cut of the transcript was held
        self._open_entry: int | None = None  # the seq of the entry held as a model
        self._open_message: int | None = None  # the index of the message held as a model
        self._seal: Callable[[str], str | None] | None = None
        self._views: dict[str, Any] | None = None  # the views section of an append's document the rows go into

    def prime(self, recent: WrittenRowsCache | None, summary: Summary | None = None) -> None:
        """Takes `recent` (None: nothing) as the newest stored rows, so the fold's reads skip the database,
        and keeps them current. `summary` is where the fold starts; an `EditWindow` starts there where
        `recent` holds none. Only appends are primed."""
        self._known = (
            WrittenRowsCache(dict(recent.entries), dict(recent.messages)) if recent is not None else WrittenRowsCache({}, {})
        )
        window = recent.edit if recent is not None else None
        self._window, self._start = window.copy() if window is not None else EditWindow.start(summary), summary

    def recent(self) -> WrittenRowsCache | None:
        """Returns the newest rows as this buffer's writes left them, after its flush. None when not primed,
        or a cut or clear made them unknown."""
        known = self._known
        if known is None:
            return None
        newest = sorted(known.entries.values(), key=lambda e: e.seq)[-WrittenRowsCache.ENTRIES :]
        last = max(known.messages, default=None)
        if last is not None and (last != self._length - 1 if self._length is not None else self._cut_seen):
            last = None  # not the transcript's last message (a cut left an older one known): unknown
        if self._window is not None:
            self._window.trim()
        return WrittenRowsCache(
            {e.segment: e for e in newest}, {last: known.messages[last]} if last is not None else {}, self._window
        )

    def appended(self) -> Appended:
        """As `ViewRows.appended`, with the views section of the append's document (`_views`)."""
        done = Appended(self.bodies, self.message_bodies, self.recent(), self.summary_json, self._views)
        self.bodies, self.message_bodies = [], []
        return done

    def _remember(self) -> None:
        """Folds the held writes into the known newest rows (at the flush)."""
        known = self._known
        if known is None:
            return
        gone = {seq for seq, held in self._entries.items() if held is None}
        if gone:
            for segment in [g for g, e in known.entries.items() if e.seq in gone]:
                del known.entries[segment]
        for held in self._entries.values():
            if held is not None:
                entry = held if isinstance(held, Entry) else Entry.model_validate_json(held[1])
                known.entries[entry.segment] = entry
        for index, message in self._messages.items():
            if isinstance(message, Message):
                known.messages[index] = message
            else:  # held as its row (its text sealed): not known as a model
                known.messages.pop(index, None)

    def _unknown(self) -> None:
        """A cut or a clear: the known rows are not followed any further."""
        self._known = self._window = None

    # reads: held writes first
    def summary(self) -> Summary | None:
        return self._summary if self._summary is not None else super().summary()

    def put_summary(self, summary: Summary) -> None:
        self._summary = summary

    def _held_entry(self, seq: int) -> Entry | None:
        held = self._entries.get(seq)
        return held if not isinstance(held, tuple) else Entry.model_validate_json(held[1])

    def entry(self, segment: str) -> Entry | None:
        if segment in self._segments:
            seq = self._segments[segment]
            return None if seq is None else self._held_entry(seq)
        known = self._known.entries.get(segment) if self._known is not None else None
        stored = known if known is not None else self._stored_entry(segment)
        if stored is not None and stored.seq in self._entries:
            return self._held_entry(stored.seq)  # deleted (None) or replaced since it was stored
        return stored

    def entry_seq(self, segment: str) -> int | None:
        if segment in self._segments:
            return self._segments[segment]
        known = self._known.entries.get(segment) if self._known is not None else None
        seq = known.seq if known is not None else self._stored_entry_seq(segment)
        return None if seq is not None and seq in self._entries and self._entries[seq] is None else seq

    def put_entry(self, entry: Entry) -> None:
        opened = self._open_entry
        if opened is not None and opened != entry.seq:
            held = self._entries.get(opened)
            if isinstance(held, Entry):
                self._entries[opened] = (held.segment, _entry_json(held))
        self._entries[entry.seq] = entry
        self._segments[entry.segment] = entry.seq
        self._open_entry = entry.seq
        if self._window is not None:
            self._window.put_entry(entry.seq, entry.segment)

    def delete_entries(self, seqs: Iterable[int]) -> None:
        seqs = list(seqs)
        if self._window is not None:
            self._window.drop_entries(seqs)
        for seq in seqs:  # a stored entry's segment need not be read: `entry` checks the held seqs
            held = self._entries.get(seq)
            if held is not None:
                self._segments[held[0] if isinstance(held, tuple) else held.segment] = None
            self._entries[seq] = None

    def set_aside(self, seqs: Iterable[int]) -> None:
        seqs = list(seqs)
        if self._window is not None:
            self._window.drop_entries(seqs)
        for seq in seqs:
            held = self._entries.get(seq)
            if held is None and seq not in self._entries:
                self._moves.append(seq)  # stored: moved at the flush
            elif held is not None:
                segment, body = held if isinstance(held, tuple) else (held.segment, _entry_json(held))
                self._aside.append((seq, segment, body))
                self._segments[segment] = None
            self._entries[seq] = None

    def drop_aside(self) -> None:
        self._moves, self._aside, self._drop_aside = [], [], True

    def aside(self) -> tuple[Entry, ...]:
        self.flush()
        return super().aside()

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        for o in outcomes:
            body = o.model_dump_json()
            self._outcomes.append((o.seq[0], o.seq[1], o.card, o.after, body))
            self.bodies.append(("outcome", body, o))
            if self._window is not None:
                self._window.put_outcome(o.seq, o.card, o.after)

    def message(self, index: int) -> Message | None:
        held = self._messages.get(index)
        if held is None:
            if self._cut is not None and index >= self._cut:
                return None  # cut: deleted at the flush
            known = self._known.messages.get(index) if self._known is not None else None
            return known if known is not None else self._stored_message(index)
        return held if not isinstance(held, tuple) else self._decode_messages([held[2]])[0]

    def _sealer(self) -> Callable[[str], str | None] | None:
        """The conversation's sealer (`ViewTexts.sealer`, its key looked up once), None
        where the store keeps no data keys."""
        if self.texts is None:
            return None
        if self._seal is None:
            self._seal = self.texts.sealer(self.cid)
        return self._seal

    def _message_row(self, message: Message) -> tuple[str, int | None, str]:
        body = self._message_body(message, self._sealer())
        if self.texts is None or '"sealed":' in body:  # not erased: it decodes to the message
            self.message_bodies.append((body, message))
        return message.role, message.number, body

    def put_message(self, index: int, message: Message) -> None:
        opened = self._open_message
        if opened is not None and opened != index:
            held = self._messages.get(opened)
            if isinstance(held, Message):
                self._messages[opened] = self._message_row(held)
        self._messages[index] = message
        self._open_message = index
        if self._window is not None:
            self._window.put_message(index, message)

    def end_block(self, index: int, end: int | None) -> None:
        self._ends[index] = end

    def put_page(self, message: int, page: int) -> None:
        self._pages[message] = page
        if self._window is not None:
            self._window.put_page(message, page)

    def put_turn(self, turn: TurnMark) -> None:
        self._turns.append((turn.version, turn.message, turn.at.isoformat()))

    def put_usage(self, usage: UsageRow) -> None:
        if self.s.usage is not None:  # where the generation has the table
            self._usage.append(usage_values(usage))

    def user_index(self, number: int) -> int | None:
        self.flush()
        return super().user_index(number)

    def block_end(self, number: int) -> int | None:
        self.flush()
        return super().block_end(number)

    # cuts: flush, then at once
    def cut_outcomes(self, cards: set[str], length: int) -> int:
        self.flush()
        self._unknown()
        return super().cut_outcomes(cards, length)

    def _stored_entry(self, segment: str) -> Entry | None:
        """The stored entry of `segment` (a read), for `entry`."""
        return SQLRows.entry(self, segment)

    def _stored_entry_seq(self, segment: str) -> int | None:
        """The version of the stored entry of `segment` (a read), for `entry_seq`."""
        return SQLRows.entry_seq(self, segment)

    def _stored_message(self, index: int) -> Message | None:
        """The stored transcript message at `index` (a read), for `message`."""
        return SQLRows.message(self, index)

    def cut_messages(self, keep: int) -> None:
        """Holds the cut: stored messages from `keep` on go at the flush. Drops held messages and block ends
        from `keep` on."""
        if self._known is not None:
            for index in [i for i in self._known.messages if i >= keep]:
                del self._known.messages[index]
        self._cut = keep if self._cut is None else min(self._cut, keep)
        self._cut_seen = True
        self._messages = {i: m for i, m in self._messages.items() if i < keep}
        self._ends = {i: e for i, e in self._ends.items() if i < keep}
        if self._open_message is not None and self._open_message >= keep:
            self._open_message = None
        if self._window is not None:
            self._window.cut_messages(keep)
            kept = self._messages.get(keep - 1)  # an edit's message, put before its cut: known again
            if isinstance(kept, Message):
                self._window.put_message(keep - 1, kept)

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        self.flush()
        self._unknown()
        return super().cut_pages(after)

    def clear(self) -> None:
        self.flush()
        self._unknown()
        super().clear()

    # ------------------------------------------------------------ how the held writes are sent

    @abstractmethod
    def _write_summary(self, summary: Summary) -> None:
        """Writes the held summary (at the flush)."""

    @abstractmethod
    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Inserts `rows` (values of `columns` after `cid`) into row table `table`, with its ON
        CONFLICT clause (`ROW_TABLES`)."""

    @abstractmethod
    def _set_aside_rows(self) -> None:
        """Writes what `drop_aside` and `set_aside` hold (at the flush, before the entries)."""

    @abstractmethod
    def _delete_entries(self, seqs: list[int]) -> None:
        """Deletes the stored entries of `seqs`."""

    @abstractmethod
    def _cut_stored_messages(self, keep: int) -> None:
        """Deletes the stored transcript messages from index `keep` on (at the flush, before the
        held messages are written)."""

    @abstractmethod
    def _end_blocks(self, ends: list[tuple[int, int | None]]) -> None:
        """Sets the block end of each stored message of `ends` ((index, end))."""

    def flush(self) -> None:
        """Sends the held writes, one bulk statement per table (`_insert_many`). A held message goes with
        its block end; only a stored message's end is an UPDATE."""
        entries = []
        for seq, held in self._entries.items():
            if isinstance(held, Entry):
                body = _entry_json(held)
                self.bodies.append(("entry", body, held))
                held = (held.segment, body)
            if held is not None:
                entries.append((seq, *held))
        self._remember()
        self._set_aside_rows()
        self._delete_entries([seq for seq, held in self._entries.items() if held is None])
        self._insert_many("entries", ROW_TABLES["entries"].names, entries)
        self._insert_many("outcomes", ROW_TABLES["outcomes"].names, self._outcomes)
        if self._cut is not None:
            self._cut_stored_messages(self._cut)
        messages, ends = sorted(self._messages.items()), self._ends
        rows = [(i, *(held if isinstance(held, tuple) else self._message_row(held))) for i, held in messages]
        self._insert_many("messages", MESSAGE_COLUMNS, [row for row in rows if row[0] not in ends])  # block_end kept
        self._insert_many(  # with the end held for it
            "messages",
            ROW_TABLES["messages"].names,
            [(i, role, number, ends[i], body) for i, role, number, body in rows if i in ends],
        )
        self._end_blocks([(i, end) for i, end in ends.items() if i not in self._messages])  # ends of stored messages
        self._insert_many("pages", ROW_TABLES["pages"].names, list(self._pages.items()))
        self._insert_many("turns", ROW_TABLES["turns"].names, self._turns)
        if self._usage:  # held only where the generation has the table
            self._insert_many(USAGE.name, USAGE.names, self._usage)
        if self._summary is not None:
            self._write_summary(self._summary)
            self._length = self._summary.length
        self._entries, self._segments, self._outcomes = {}, {}, []
        self._drop_aside, self._moves, self._aside = False, [], []
        self._messages, self._ends, self._pages, self._turns, self._summary = {}, {}, {}, [], None
        self._usage = []
        self._cut = None
        self._open_entry = self._open_message = None


_ENTRY_JSON = Entry.__pydantic_serializer__


class StatementRows(BufferedRows):
    """`BufferedRows` whose held writes go as one `executemany` per table. PostgreSQL sends JSON instead
    (`PostgresBufferedRows`)."""

    def _set_aside_rows(self) -> None:
        """Writes what `drop_aside` and `set_aside` hold (at the flush, before the entries)."""
        if self._drop_aside:
            SQLRows.drop_aside(self)
        self._many(self.s.set_aside, [(self.aside_cid, self.cid, seq) for seq in self._moves])
        self._many(self.s.insert("entries", upsert=False), [(self.aside_cid, *row) for row in self._aside])

    def _write_summary(self, summary: Summary) -> None:
        """Writes the held summary (at the flush)."""
        SQLRows.put_summary(self, summary)

    def _many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) == 1:  # psycopg's executemany syncs a pipeline (a round trip); one row need not
            self.curs.execute(sql, rows[0])
        elif rows:
            self.curs.executemany(sql, rows)

    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Inserts `rows` (values of `columns` after `cid`) into `table` with its ON CONFLICT clause, in one
        `executemany`."""
        self._many(self.s.insert(table, columns), [(self.cid, *row) for row in rows])

    def _cut_stored_messages(self, keep: int) -> None:
        """Deletes the stored transcript messages from index `keep` on (at the flush, before the
        held messages are written)."""
        SQLRows.cut_messages(self, keep)

    def _delete_entries(self, seqs: list[int]) -> None:
        self._many(self.s.delete_entry, [(self.cid, seq) for seq in seqs])

    def _end_blocks(self, ends: list[tuple[int, int | None]]) -> None:
        self._many(self.s.end_block, [(end, self.cid, index) for index, end in ends])


def _entry_json(entry: Entry) -> str:
    """Returns `entry.model_dump_json()` (its serializer called directly)."""
    return _ENTRY_JSON.to_json(entry).decode()
