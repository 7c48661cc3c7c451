"""The row tables of one generation of the read models, per backend.

A generation `g` owns six tables named `views_g<g>_<table>`: `heads` (one row per
conversation: its `projections.row_fold.Head` as JSON and its version), `entries` (run record
entries kept, by version), `outcomes` (card outcomes, by the version and place of the event
that recorded them), `messages` (the transcript, by index, with the user message number and
where its block ends), `pages` (page changes) and `turns`. `SQLRows` reads and writes one
conversation's rows inside a transaction the caller holds; `MemoryRows` is the same on dicts,
for the in-memory store. Bodies are pydantic JSON; keys are plain columns with indexes, so
every read the fold or a turn makes is an index lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from pydantic import TypeAdapter

from adapters.store.crypto import ERASED, ViewTexts
from adapters.views.caches import MESSAGE_BODY, SEPARATOR, KeptMessages, Placement
from domain.values import assembled
from projections.card_outcomes import CardOutcome
from projections.row_fold import Head, TurnMark
from projections.run_record import Entry
from projections.transcript import Message

_ENTRIES = TypeAdapter(tuple[Entry, ...])

TABLES = ("heads", "entries", "outcomes", "messages", "pages", "turns")


def message_of_row(fields: dict[str, Any]) -> Message:
    """Returns the transcript message of a row body's fields (`SQLRows._message_body`, its text
    opened): the model pydantic's validation of the same JSON makes (its fields in order, the
    JSON arrays as tuples, the fields the body names as the fields set), without validating
    again what the fold validated when it wrote the row; about a third of the cost of
    validation (docs/benchmarks.md, issue 25). Raises KeyError for a body without `role` or
    `text`; a field the body lacks takes its default."""
    segments, ends = fields.get("segments", ()), fields.get("ends", ())
    return assembled(
        Message,
        {
            "role": fields["role"],
            "text": fields["text"],
            "number": fields.get("number"),
            "segments": segments if type(segments) is tuple else tuple(segments),
            "ends": ends if type(ends) is tuple else tuple(ends),
        },
        set(fields),
    )


def decode_messages(bodies: Sequence[str], texts: ViewTexts | None, cid: str) -> tuple[Message, ...]:
    """Returns the transcript messages of row bodies of conversation `cid` (its UUID's string),
    in order, each text opened where it is sealed (`texts`: the conversation's key looked up
    once for the rows). The bodies are the fold's own writes, validated when it made them
    (`SQLRows._message_body`): each is read back as the model it was (`message_of_row`), not
    validated again. Raises ValueError for a sealed body where `texts` is None, InvalidTag for
    a sealed text that does not open with the conversation's key."""
    decoded = []
    open_text: Callable[[str], str] | None = None
    loads, made = orjson.loads, message_of_row
    for body in bodies:
        fields = loads(body)
        sealed = fields.pop("sealed", None)
        if sealed is not None:
            if open_text is None:
                if texts is None:
                    raise ValueError("a transcript row holds a sealed text, but the store has no data keys")
                open_text = texts.opener(cid)  # the key looked up once for the rows
            fields["text"] = open_text(sealed)
        decoded.append(made(fields))
    return tuple(decoded)


class ReadMoved(Exception):  # a signal to the reader, never seen outside ReadModels
    """Raised by a turn read whose rows moved under it: a rebuild in another process dropped
    its generation's tables, or a later statement of the read found the head at another
    version than its first one did. The reader takes the live pointer and reads again."""


def aside_cid(cid: str) -> str:
    """Returns the `cid` column's value of a conversation's entries set aside for its latest
    turn (`SQLRows.set_aside`)."""
    return f"{cid}:turn"


def table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns the table names of `generation`: {"heads": "views_g<N>_heads", …}, qualified
    with `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in TABLES}


OVERVIEW_TABLES = ("overview", "overview_marks")
"""The overview read model's tables of a generation (`adapters.views.overview_rows`): not rows
the view fold writes, nor cleared with them; made with a generation's tables since the
overview read model came (an earlier generation has none)."""


def overview_table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns {"overview": "views_g<N>_overview", "overview_marks": …}, qualified with
    `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in OVERVIEW_TABLES}


def overview_statements(generation: int, schema: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's overview tables: `overview` (one row
    per conversation: its version and the overview as JSON) and `overview_marks` (a row per
    segment's and user message's point: key, version, kind, tone)."""
    n = overview_table_names(generation, schema)
    return [
        f"CREATE TABLE IF NOT EXISTS {n['overview']} (cid TEXT PRIMARY KEY, version BIGINT NOT NULL, body TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {n['overview_marks']} (cid TEXT NOT NULL, mark TEXT NOT NULL, version BIGINT NOT NULL, "
        "kind TEXT NOT NULL, tone TEXT NOT NULL, PRIMARY KEY (cid, mark, version))",
    ]


def activity_index(generation: int) -> str:
    """Returns the name of the index of a generation's heads by last activity (unqualified)."""
    return f"views_g{generation}_heads_activity"


def activity_statement(generation: int, schema: str, activity: str) -> str:
    """Returns the CREATE INDEX statement of the heads by last activity: `activity`, the
    backend's expression of a head body's `last_at` (`SQLViewStorage.activity`), then `cid`."""
    return (
        f"CREATE INDEX IF NOT EXISTS {activity_index(generation)} ON {table_names(generation, schema)['heads']} ({activity}, cid)"
    )


def create_statements(generation: int, schema: str = "", heads_storage: str = "", activity: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's tables; `heads_storage` follows the
    heads table's columns (PostgreSQL's `WITH (fillfactor = …)`, `SQLViewStorage.heads_storage`);
    with `activity` (an expression of a head body's `last_at`), the heads' index by it."""
    n, big = table_names(generation, schema), "BIGINT"
    bare = table_names(generation)
    return [
        f"CREATE TABLE IF NOT EXISTS {n['heads']} (cid TEXT PRIMARY KEY, version {big} NOT NULL, body TEXT NOT NULL)"
        f"{heads_storage}",
        *([activity_statement(generation, schema, activity)] if activity else []),
        f"CREATE TABLE IF NOT EXISTS {n['entries']} (cid TEXT NOT NULL, seq {big} NOT NULL, segment TEXT NOT NULL, "
        f"body TEXT NOT NULL, PRIMARY KEY (cid, seq))",
        f"CREATE INDEX IF NOT EXISTS {bare['entries']}_segment ON {n['entries']} (cid, segment)",
        f"CREATE TABLE IF NOT EXISTS {n['outcomes']} (cid TEXT NOT NULL, v {big} NOT NULL, sub {big} NOT NULL, "
        f"card TEXT, after {big} NOT NULL, body TEXT NOT NULL, PRIMARY KEY (cid, v, sub))",
        f"CREATE TABLE IF NOT EXISTS {n['messages']} (cid TEXT NOT NULL, idx {big} NOT NULL, role TEXT NOT NULL, "
        f"number {big}, block_end {big}, body TEXT NOT NULL, PRIMARY KEY (cid, idx))",
        f"CREATE INDEX IF NOT EXISTS {bare['messages']}_number_idx ON {n['messages']} (cid, number, idx)",
        f"CREATE TABLE IF NOT EXISTS {n['pages']} (cid TEXT NOT NULL, message {big} NOT NULL, page {big} NOT NULL, "
        f"PRIMARY KEY (cid, message))",
        f"CREATE TABLE IF NOT EXISTS {n['turns']} (cid TEXT NOT NULL, version {big} NOT NULL, message {big} NOT NULL, "
        f"at TEXT NOT NULL, PRIMARY KEY (cid, version))",
        *overview_statements(generation, schema),
    ]


class SQLRows:
    """One conversation's rows in a generation, read and written through `curs` (a cursor of
    an open transaction). `p` is the driver's placeholder (`?` or `%s`). With `texts`, a
    transcript message's text is kept sealed with the conversation's data key (`ViewTexts`):
    its body holds `sealed` instead of `text`."""

    tip: bytes | None = None
    """The hash chain's hash at the head's version, when the read that made these rows took it
    (`TurnRows.tip`): what a read kept of this version is kept under."""

    def __init__(self, curs: Any, tables: dict[str, str], cid: str, p: str, texts: ViewTexts | None = None) -> None:
        self.curs, self.cid, self.p, self.t, self.texts = curs, cid, p, tables, texts

    def _message_body(self, message: Message, seal: Callable[[str], str | None] | None = None) -> str:
        """Returns the JSON body a message's row keeps: its text sealed where `texts` is set
        (by `seal`, `texts.sealer(cid)`, when given: one key lookup for many rows)."""
        if self.texts is None:
            return message.model_dump_json()
        body = dict(message.__dict__)  # model_dump(mode="json") of its str, int and tuple fields, 5x cheaper
        sealed = (seal or self.texts.sealer(self.cid))(body.pop("text"))
        if sealed is None:
            body["text"] = ERASED
        else:
            body["sealed"] = sealed
        return orjson.dumps(body).decode()

    def _decode_messages(self, bodies: Sequence[str], kept: KeptMessages | None = None) -> tuple[Message, ...]:
        """Returns the messages of row bodies, in order (plain bodies decoded in one call).
        With `kept`, a body decoded before is not again (nor its text opened), while the
        conversation's texts are readable; the others are kept there."""
        if kept is None:
            return self._decode(bodies)
        found = [kept.get(self.cid, body) for body in bodies]
        if (
            self.texts is not None
            and any(m is not None and '"sealed":' in b for m, b in zip(found, bodies, strict=True))
            and not self.texts.readable(self.cid)
        ):
            found = [None] * len(bodies)  # erased: the kept texts are not to be read any more
        missing = [i for i, message in enumerate(found) if message is None]
        if missing:
            for i, message in zip(missing, self._decode([bodies[i] for i in missing]), strict=True):
                found[i] = message
                kept.put(self.cid, bodies[i], message)
        return cast("tuple[Message, ...]", tuple(found))  # every None was filled above

    def _decode(self, bodies: Sequence[str]) -> tuple[Message, ...]:
        return decode_messages(bodies, self.texts, self.cid)

    def _blocks(self, numbers: set[int]) -> tuple[str, tuple[Any, ...]]:
        """Returns a query of `(idx, number, block_end)` of the user messages `numbers` and its
        arguments (an `IN` list, which SQLite looks up in the `(cid, number, idx)` index)."""
        return (
            f"SELECT idx, number, block_end FROM {self.t['messages']} WHERE cid = ? "
            f"AND number IN ({', '.join('?' * len(numbers))})",
            (self.cid, *sorted(numbers)),
        )

    def _select(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs a read (`?` placeholders) and returns the cursor."""
        self.curs.execute(sql.replace("?", self.p), args)
        return self.curs

    def _q(self, sql: str, *args: Any) -> Any:
        self.curs.execute(sql.replace("?", self.p), (self.cid, *args))
        return self.curs

    def clear(self) -> None:
        """Deletes every row of the conversation."""
        for table in self.t.values():
            self._q(f"DELETE FROM {table} WHERE cid = ?")
        SQLRows.drop_aside(self)

    @property
    def aside_cid(self) -> str:
        """The key under which the entries set aside (`set_aside`) are kept in the entries
        table: no read of the conversation's rows (by its `cid`) finds them."""
        return aside_cid(self.cid)

    # ---------------------------------------------------------------- head

    def head(self) -> Head | None:
        """Returns the conversation's head, None before its first event."""
        row = self._q(f"SELECT body FROM {self.t['heads']} WHERE cid = ?").fetchone()
        return Head.model_validate_json(row["body"]) if row else None

    def put_head(self, head: Head) -> None:
        self._q(
            f"INSERT INTO {self.t['heads']} (cid, version, body) VALUES (?, ?, ?) "
            "ON CONFLICT (cid) DO UPDATE SET version = excluded.version, body = excluded.body",
            head.version,
            head.model_dump_json(),
        )

    # ---------------------------------------------------------------- run record

    def entry(self, segment: str) -> Entry | None:
        row = self._q(f"SELECT body FROM {self.t['entries']} WHERE cid = ? AND segment = ?", segment).fetchone()
        return Entry.model_validate_json(row["body"]) if row else None

    def put_entry(self, entry: Entry) -> None:
        self._q(
            f"INSERT INTO {self.t['entries']} (cid, seq, segment, body) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (cid, seq) DO UPDATE SET body = excluded.body",
            entry.seq,
            entry.segment,
            entry.model_dump_json(),
        )

    def delete_entries(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self._q(f"DELETE FROM {self.t['entries']} WHERE cid = ? AND seq = ?", seq)

    def set_aside(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self._select(f"UPDATE {self.t['entries']} SET cid = ? WHERE cid = ? AND seq = ?", (self.aside_cid, self.cid, seq))

    def drop_aside(self) -> None:
        self._select(f"DELETE FROM {self.t['entries']} WHERE cid = ?", (self.aside_cid,))

    def turn_rows(self, length: int, version: int) -> tuple[tuple[Message, ...], tuple[Entry, ...], tuple[CardOutcome, ...]]:
        """Returns, in one statement, what the latest turn saw (`projections.row_fold.Head.turn_intact`):
        the first `length` transcript messages, the entries set aside for it and those kept of
        versions up to `version` (oldest first), and the card outcomes recorded up to `version`."""
        t = self.t
        rows = self._select(
            f"SELECT 0 AS k, idx AS n, 0 AS sub, body FROM {t['messages']} WHERE cid = ? AND idx < ? UNION ALL "
            f"SELECT 1, seq, 0, body FROM {t['entries']} WHERE cid = ? AND seq <= ? UNION ALL "
            f"SELECT 1, seq, 0, body FROM {t['entries']} WHERE cid = ? UNION ALL "
            f"SELECT 2, v, sub, body FROM {t['outcomes']} WHERE cid = ? AND v <= ? ORDER BY k, n, sub",
            (self.cid, length, self.cid, version, self.aside_cid, self.cid, version),
        ).fetchall()
        bodies: tuple[list[str], list[str], list[str]] = ([], [], [])
        for r in rows:
            bodies[int(r["k"])].append(r["body"])
        return (
            self._decode_messages(bodies[0]),
            _ENTRIES.validate_json("[" + ",".join(bodies[1]) + "]"),
            tuple(CardOutcome.model_validate_json(b) for b in bodies[2]),
        )

    def aside(self) -> tuple[Entry, ...]:
        """Returns the entries set aside for the latest turn, oldest first."""
        rows = self._select(f"SELECT body FROM {self.t['entries']} WHERE cid = ? ORDER BY seq", (self.aside_cid,)).fetchall()
        return _ENTRIES.validate_json("[" + ",".join(r["body"] for r in rows) + "]")

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> Sequence[Entry]:
        """Returns the kept run record entries, oldest first: decoded in one call, or with
        `decode` (a body's JSON to its entry) each when first asked for (`LazyEntries`). With
        `decode`, `newest` and `total` (how many are kept: the head's `seqs`), only the newest
        `newest` are read at first, the older ones when one of them is first asked for (in the
        caller's transaction); should they not be `total` in all, raises ReadMoved."""
        if decode is not None and newest is not None and total is not None and total > newest:
            rows = self._q(
                f"SELECT seq, body FROM {self.t['entries']} WHERE cid = ? ORDER BY seq DESC LIMIT ?", newest
            ).fetchall()[::-1]
            if not rows:
                raise ReadMoved(f"the head of {self.cid} keeps {total} entries, its rows none")

            def older() -> list[str]:
                before = self._q(
                    f"SELECT body FROM {self.t['entries']} WHERE cid = ? AND seq < ? ORDER BY seq", rows[0]["seq"]
                ).fetchall()
                if len(before) != total - len(rows):
                    raise ReadMoved(f"the head of {self.cid} keeps {total} entries, its rows {len(before) + len(rows)}")
                return [r["body"] for r in before]

            return LazyEntries([r["body"] for r in rows], decode, total, older)
        rows = self._q(f"SELECT body FROM {self.t['entries']} WHERE cid = ? ORDER BY seq").fetchall()
        if decode is not None:
            return LazyEntries([r["body"] for r in rows], decode)
        return _ENTRIES.validate_json("[" + ",".join(r["body"] for r in rows) + "]")

    # ---------------------------------------------------------------- card outcomes

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        for o in outcomes:
            self._q(
                f"INSERT INTO {self.t['outcomes']} (cid, v, sub, card, after, body) VALUES (?, ?, ?, ?, ?, ?)",
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
            removed += len(self._q(f"DELETE FROM {self.t['outcomes']} WHERE cid = ? AND card = ? RETURNING v", card).fetchall())
        return removed + len(
            self._q(
                f"DELETE FROM {self.t['outcomes']} WHERE cid = ? AND card IS NULL AND after >= ? RETURNING v", length
            ).fetchall()
        )

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        """Returns the card outcomes, oldest first; only the `newest` ones if given; each body
        decoded by `decode` if given."""
        if newest is None:
            rows = self._q(f"SELECT body FROM {self.t['outcomes']} WHERE cid = ? ORDER BY v, sub").fetchall()
        else:
            rows = self._q(
                f"SELECT body FROM {self.t['outcomes']} WHERE cid = ? ORDER BY v DESC, sub DESC LIMIT ?", newest
            ).fetchall()[::-1]
        return tuple((decode or CardOutcome.model_validate_json)(r["body"]) for r in rows)

    # ---------------------------------------------------------------- transcript

    def message(self, index: int) -> Message | None:
        row = self._q(f"SELECT body FROM {self.t['messages']} WHERE cid = ? AND idx = ?", index).fetchone()
        return self._decode_messages([row["body"]])[0] if row else None

    def user_index(self, number: int) -> int | None:
        row = self._q(  # MAX, not ORDER BY: the (cid, number) index, not a walk of the transcript
            f"SELECT MAX(idx) AS idx FROM {self.t['messages']} WHERE cid = ? AND number = ?", number
        ).fetchone()
        return int(row["idx"]) if row and row["idx"] is not None else None

    def messages_at(self, indexes: set[int], kept: KeptMessages | None = None) -> dict[int, Message]:
        """Returns the transcript messages at `indexes` (one statement); `kept` as in
        `_decode_messages`."""
        bodies = self._bodies_at(indexes)
        return dict(zip(bodies, self._decode_messages(list(bodies.values()), kept), strict=True))

    def _bodies_at(self, indexes: set[int] | list[int]) -> dict[int, str]:
        """Returns the row bodies of the transcript messages at `indexes` there are (one statement)."""
        if not indexes:
            return {}
        marks = ", ".join("?" * len(indexes))
        rows = self._q(
            f"SELECT idx, body FROM {self.t['messages']} WHERE cid = ? AND idx IN ({marks})", *sorted(indexes)
        ).fetchall()
        return {int(r["idx"]): r["body"] for r in rows}

    def block_ends(self, numbers: set[int]) -> dict[int, int | None]:
        """Returns, for each user message number, the index of the user message after it (None
        when its block runs to the end); a number with no message is left out (one statement)."""
        if not numbers:
            return {}
        marks = ", ".join("?" * len(numbers))
        rows = self._q(
            f"SELECT idx, number, block_end FROM {self.t['messages']} WHERE cid = ? AND number IN ({marks})", *sorted(numbers)
        ).fetchall()
        found: dict[int, int | None] = {}
        for r in sorted(rows, key=lambda r: r["idx"]):  # the newest message of a number wins
            found[int(r["number"])] = None if r["block_end"] is None else int(r["block_end"])
        return found

    def block_end(self, number: int) -> int | None:
        """Returns the index of the user message after user message `number` (None: none)."""
        return self.block_ends({number}).get(number)

    def placement_reads(
        self, length: int, kept: KeptMessages | None = None, known: Placement | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """Returns `(messages_at, block_ends)` for placing a turn's notes in a transcript of
        `length` messages: `block_ends` reads, in the same statement, the messages on both
        sides of each block's end (where a note goes), so `messages_at` asks the database only
        for what that statement did not bring (a note placed by position). With `kept`, each
        message is decoded once per row body (`_decode_messages`). With `known` (what is known
        of these rows already: `adapters.views.caches.KnownBlocks`), neither asks the
        database for what it holds, nor decodes a message it holds decoded; whatever they read
        is added to it."""
        known = known if known is not None else Placement()
        bodies, ends = known.bodies, known.ends

        def block_ends(numbers: set[int]) -> dict[int, int | None]:
            known.numbers.update(numbers)
            missing = {n for n in numbers if n not in ends}
            if missing:
                m = self.t["messages"]
                # each position beside a block's end is its own primary-key lookup (a correlated
                # subquery, run once per position: a condition on it would run it again): a join
                # on `idx IN (…)` let PostgreSQL's planner, with stale statistics, scan the
                # conversation's whole transcript
                blocks, args = self._blocks(missing)
                rows = self._select(
                    (
                        f"WITH b AS ({blocks}), "
                        "p AS (SELECT COALESCE(block_end, ?) - 1 AS i FROM b UNION SELECT COALESCE(block_end, ?) FROM b) "
                        "SELECT 0 AS k, idx, number, block_end, NULL AS body FROM b UNION ALL "
                        f"SELECT 1, i, NULL, NULL, (SELECT body FROM {m} WHERE cid = ? AND idx = p.i) FROM p"
                    ),
                    (*args, length, length, self.cid),
                ).fetchall()
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
            f"INSERT INTO {self.t['messages']} (cid, idx, role, number, block_end, body) VALUES (?, ?, ?, ?, NULL, ?) "
            "ON CONFLICT (cid, idx) DO UPDATE SET role = excluded.role, number = excluded.number, "
            "body = excluded.body",
            index,
            message.role,
            message.number,
            self._message_body(message),
        )

    def end_block(self, index: int, end: int | None) -> None:
        self.curs.execute(
            f"UPDATE {self.t['messages']} SET block_end = {self.p} WHERE cid = {self.p} AND idx = {self.p}",
            (end, self.cid, index),
        )

    def cut_messages(self, keep: int) -> None:
        self._q(f"DELETE FROM {self.t['messages']} WHERE cid = ? AND idx >= ?", keep)

    def messages(self) -> tuple[Message, ...]:
        """Returns the whole transcript, in order."""
        rows = self._q(f"SELECT body FROM {self.t['messages']} WHERE cid = ? ORDER BY idx").fetchall()
        return self._decode_messages([r["body"] for r in rows])

    # ---------------------------------------------------------------- view context, turns

    def put_page(self, message: int, page: int) -> None:
        self._q(
            f"INSERT INTO {self.t['pages']} (cid, message, page) VALUES (?, ?, ?) "
            "ON CONFLICT (cid, message) DO UPDATE SET page = excluded.page",
            message,
            page,
        )

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        self._q(f"DELETE FROM {self.t['pages']} WHERE cid = ? AND message > ?", after)
        newest = self._q(f"SELECT page FROM {self.t['pages']} WHERE cid = ? ORDER BY message DESC LIMIT 1").fetchone()
        shown = self._q(
            f"SELECT page FROM {self.t['pages']} WHERE cid = ? AND page <> 0 ORDER BY message DESC LIMIT 1"
        ).fetchone()
        return (int(newest["page"]) if newest else None), (int(shown["page"]) if shown else 0)

    def put_turn(self, turn: TurnMark) -> None:
        self._q(
            f"INSERT INTO {self.t['turns']} (cid, version, message, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (cid, version) DO NOTHING",
            turn.version,
            turn.message,
            turn.at.isoformat(),
        )


@dataclass
class MemoryConversation:
    """One conversation's rows in memory."""

    head: Head | None = None
    entries: dict[int, Entry] = field(default_factory=dict)
    aside: dict[int, Entry] = field(default_factory=dict)
    outcomes: dict[tuple[int, int], CardOutcome] = field(default_factory=dict)
    messages: dict[int, Message] = field(default_factory=dict)
    numbers: dict[int, int] = field(default_factory=dict)
    block_ends: dict[int, int | None] = field(default_factory=dict)
    pages: dict[int, int] = field(default_factory=dict)
    turns: dict[int, TurnMark] = field(default_factory=dict)


class MemoryRows:
    """`SQLRows` on a `MemoryConversation` (the in-memory store's views)."""

    tip: bytes | None = None
    """As `SQLRows.tip`: the in-memory store keeps no chain."""

    def __init__(self, rows: MemoryConversation) -> None:
        self.r = rows

    def clear(self) -> None:
        fresh = MemoryConversation()
        for name in fresh.__dataclass_fields__:
            setattr(self.r, name, getattr(fresh, name))

    def head(self) -> Head | None:
        return self.r.head

    def put_head(self, head: Head) -> None:
        self.r.head = head

    def entry(self, segment: str) -> Entry | None:
        return next((e for e in reversed(self.r.entries.values()) if e.segment == segment), None)

    def put_entry(self, entry: Entry) -> None:
        self.r.entries[entry.seq] = entry

    def delete_entries(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self.r.entries.pop(seq, None)

    def set_aside(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            entry = self.r.entries.pop(seq, None)
            if entry is not None:
                self.r.aside[seq] = entry

    def drop_aside(self) -> None:
        self.r.aside.clear()

    def aside(self) -> tuple[Entry, ...]:
        return tuple(self.r.aside[s] for s in sorted(self.r.aside))

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> tuple[Entry, ...]:
        return tuple(self.r.entries[s] for s in sorted(self.r.entries))  # decoded already: the rest unused

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        for o in outcomes:
            self.r.outcomes[o.seq] = o

    def cut_outcomes(self, cards: set[str], length: int) -> int:
        gone = [k for k, o in self.r.outcomes.items() if (o.card in cards if o.card is not None else o.after >= length)]
        for key in gone:
            del self.r.outcomes[key]
        return len(gone)

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        ordered = tuple(self.r.outcomes[k] for k in sorted(self.r.outcomes))
        return ordered if newest is None else ordered[-newest:] if newest else ()

    def message(self, index: int) -> Message | None:
        return self.r.messages.get(index)

    def user_index(self, number: int) -> int | None:
        return self.r.numbers.get(number)

    def block_end(self, number: int) -> int | None:
        index = self.user_index(number)
        return None if index is None else self.r.block_ends.get(index)

    def messages_at(self, indexes: set[int], kept: KeptMessages | None = None) -> dict[int, Message]:
        return {i: self.r.messages[i] for i in indexes if i in self.r.messages}

    def block_ends(self, numbers: set[int]) -> dict[int, int | None]:
        return {n: self.block_end(n) for n in numbers if self.user_index(n) is not None}

    def placement_reads(
        self, length: int, kept: KeptMessages | None = None, known: Placement | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """As `SQLRows.placement_reads`: here both read the dicts (decoded already: `kept` and
        `known` unused)."""
        return self.messages_at, self.block_ends

    def put_message(self, index: int, message: Message) -> None:
        if index not in self.r.messages:
            self.r.block_ends[index] = None
        self.r.messages[index] = message
        if message.number is not None:
            self.r.numbers[message.number] = index

    def end_block(self, index: int, end: int | None) -> None:
        if index in self.r.messages:
            self.r.block_ends[index] = end

    def cut_messages(self, keep: int) -> None:
        for index in [i for i in self.r.messages if i >= keep]:
            number = self.r.messages.pop(index).number
            self.r.block_ends.pop(index, None)
            if number is not None and self.r.numbers.get(number) == index:
                del self.r.numbers[number]

    def messages(self) -> tuple[Message, ...]:
        return tuple(self.r.messages[i] for i in sorted(self.r.messages))

    def put_page(self, message: int, page: int) -> None:
        self.r.pages[message] = page

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        for message in [m for m in self.r.pages if m > after]:
            del self.r.pages[message]
        ordered = [self.r.pages[m] for m in sorted(self.r.pages)]
        return (ordered[-1] if ordered else None), next((p for p in reversed(ordered) if p), 0)

    def put_turn(self, turn: TurnMark) -> None:
        self.r.turns.setdefault(turn.version, turn)


class LazyEntries(Sequence[Entry]):
    """Run record entries from their JSON bodies, each decoded (by `decode`, default pydantic's
    `Entry.model_validate_json`) on first access. With `total`, `bodies` are only the newest of
    `total` entries: the first access to an older one asks `older()` for the bodies of all the
    older ones, oldest first, once."""

    def __init__(
        self,
        bodies: list[str],
        decode: Callable[[str], Entry] | None = None,
        total: int | None = None,
        older: Callable[[], list[str]] | None = None,
    ) -> None:
        self._bodies = bodies
        self._decode = decode or Entry.model_validate_json
        self._decoded: dict[int, Entry] = {}
        self._total = len(bodies) if total is None else total
        self._missing = self._total - len(bodies)  # the oldest entries, not read yet
        self._older = older

    def __len__(self) -> int:
        return self._total

    def __getitem__(self, index: int) -> Entry:  # type: ignore[override]  # an index, no slice: read one by one
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError(index)
        entry = self._decoded.get(index)
        if entry is None:
            if index < self._missing:
                assert self._older is not None
                self._bodies = [*self._older(), *self._bodies]
                self._missing = 0
            entry = self._decoded[index] = self._decode(self._bodies[index - self._missing])
        return entry


class PrefetchedRows(SQLRows):
    """`SQLRows` whose newest kept entries and newest card outcomes were read already (by
    `PostgresViewStorage.turn_rows`, as bodies joined by SEPARATOR, oldest first), with the head
    they were read with: a turn read decodes each body as the notes ask for it and asks the
    database only for transcript messages, and for the older entries should the notes reach
    them (`entries`). `run` runs its reads (the backend's, which may keep them prepared)."""

    def __init__(
        self,
        curs: Any,
        tables: dict[str, str],
        cid: str,
        p: str,
        entries: str,
        outcomes: str,
        newest: int,
        texts: ViewTexts | None = None,
        run: Callable[[Any, str, Any], Any] | None = None,
        head: Head | None = None,
        known: Placement | None = None,
    ) -> None:
        super().__init__(curs, tables, cid, p, texts)
        self._entries, self._outcomes, self._newest = entries, outcomes, newest
        self._run = run
        self._head = head
        self.placement = known if known is not None else Placement()
        """What the read knew and learned of the rows for placing its notes (`placement_reads`)."""

    def placement_reads(
        self, length: int, kept: KeptMessages | None = None, known: Placement | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """As `SQLRows.placement_reads`, knowing and learning in `self.placement`."""
        return super().placement_reads(length, kept, known if known is not None else self.placement)

    def _blocks(self, numbers: set[int]) -> tuple[str, tuple[Any, ...]]:
        """As `SQLRows._blocks`, with the numbers as one array (one statement text for any
        number of them, which the backend's `run` may keep prepared), each number its own
        lookup of its newest message in the `(cid, number, idx)` index: a condition
        `number = ANY(…)` let PostgreSQL's planner, with stale statistics, filter the
        conversation's whole transcript by number."""
        return (
            f"SELECT x.idx, n.number, x.block_end FROM unnest(?::bigint[]) AS n(number) CROSS JOIN LATERAL "
            f"(SELECT idx, block_end FROM {self.t['messages']} WHERE cid = ? AND number = n.number "
            "ORDER BY idx DESC LIMIT 1) x",
            (sorted(numbers), self.cid),
        )

    def _select(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs a read through the backend's `run` (PostgreSQL: prepared), if given."""
        if self._run is None:
            return super()._select(sql, args)
        return self._run(self.curs, sql.replace("?", self.p), args)

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> LazyEntries:
        """Returns the kept entries, oldest first, each decoded (by `decode` if given) when
        first asked for: the notes take the newest until their budget is full, so the older
        ones are mostly never decoded, nor read (the head's `seqs` say how many there are;
        `newest` and `total` are not needed). Reaching an older one reads them all, checking
        that the head is still at the version the read began with; else raises ReadMoved."""
        bodies = self._entries.split(SEPARATOR) if self._entries else []
        seqs = self._head.seqs if self._head is not None else ()
        if len(bodies) >= len(seqs):
            return LazyEntries(bodies, decode)
        return LazyEntries(bodies, decode, len(seqs), lambda: self._older_entries(list(seqs[: len(seqs) - len(bodies)])))

    def _older_entries(self, seqs: list[int]) -> list[str]:
        assert self._head is not None
        rows = self._select(
            f"SELECT h.version, e.body FROM {self.t['heads']} h LEFT JOIN {self.t['entries']} e "
            "ON e.cid = h.cid AND e.seq = ANY(?::bigint[]) WHERE h.cid = ? ORDER BY e.seq",
            (seqs, self.cid),
        ).fetchall()
        bodies = [r["body"] for r in rows if r["body"] is not None]
        if not rows or int(rows[0]["version"]) != self._head.version or len(bodies) != len(seqs):
            raise ReadMoved(f"the head of {self.cid} moved during a turn read")
        return bodies

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        if newest is not None and newest <= self._newest:
            bodies = self._outcomes.split(SEPARATOR) if self._outcomes else []
            bodies = bodies[len(bodies) - newest :] if newest else []
            return tuple((decode or CardOutcome.model_validate_json)(body) for body in bodies)
        return super().outcomes(newest, decode)


@dataclass(frozen=True)
class RecentRows:
    """The newest rows of a conversation as the append that wrote them left them: its newest
    run record entries by segment (at most `ENTRIES`) and its newest transcript message by
    index. Kept with that append's head (`HeadCache`), they answer the next append's lookups
    (a decision's entry, the message an answer joins) without a read: valid exactly as long
    as the head they came with, which is used only at its own version."""

    entries: dict[str, Entry]
    messages: dict[int, Message]

    ENTRIES = 8


class BufferedRows(SQLRows):
    """`SQLRows` that holds its writes until `flush`, which sends them with one bulk statement
    per table (a rebuild folds a page of the log this way). Reads see the held writes first.
    A cut of the transcript (`cut_messages`: a replaced transcript, an edit) is held as the
    index its stored messages go from, written at the flush before the held messages; the
    other cuts (an edit's card outcomes and view context) flush first and then run at once:
    they are rare and range over rows, and the fold needs what they removed.

    A held row is kept as the values its statement sends (its body serialised, a message's
    text sealed), not as a model: a rebuild holds a page's rows, and plain strings cost the
    garbage collector nothing. Only the newest entry and the newest message are kept as models
    until another is put (a segment's answer joins the last message, a decision updates the
    newest entry, each is put again); an older held one read back is decoded from its body."""

    def __init__(self, curs: Any, tables: dict[str, str], cid: str, p: str, texts: ViewTexts | None = None) -> None:
        super().__init__(curs, tables, cid, p, texts)
        self._entries: dict[int, Entry | tuple[str, str] | None] = {}  # seq: entry, (segment, body), None: deleted
        self._segments: dict[str, int | None] = {}
        self._outcomes: list[tuple[Any, ...]] = []
        self._messages: dict[int, Message | tuple[str, int | None, str]] = {}  # index: message, (role, number, body)
        self._ends: dict[int, int | None] = {}
        self._cut: int | None = None  # the stored messages from this index on are deleted at the flush
        self._pages: dict[int, int] = {}
        self._turns: list[tuple[int, int, str]] = []
        self._head: Head | None = None
        self._drop_aside = False  # the entries set aside before are deleted at the flush
        self._moves: list[int] = []  # stored entries to set aside at the flush
        self._aside: list[tuple[int, str, str]] = []  # held entries set aside: (seq, segment, body)
        self._known: RecentRows | None = None  # the newest rows as the last append left them (`prime`)
        self._length: int | None = None  # the transcript's length in the head the last flush wrote
        self._cut_seen = False  # whether a cut of the transcript was held
        self._open_entry: int | None = None  # the seq of the entry held as a model
        self._open_message: int | None = None  # the index of the message held as a model
        self._seal: Callable[[str], str | None] | None = None

    def prime(self, recent: RecentRows | None) -> None:
        """Takes `recent` (None: nothing) as the newest rows stored, which the reads of the
        fold then find without asking the database, and keeps them up to date with what this
        buffer writes (`recent`). An append's rows; a rebuild's are never primed."""
        self._known = RecentRows(dict(recent.entries), dict(recent.messages)) if recent is not None else RecentRows({}, {})

    def recent(self) -> RecentRows | None:
        """Returns the newest rows as this buffer's writes left them (after its flush), None
        when it was not primed or a cut or a clear made them unknown."""
        known = self._known
        if known is None:
            return None
        newest = sorted(known.entries.values(), key=lambda e: e.seq)[-RecentRows.ENTRIES :]
        last = max(known.messages, default=None)
        if last is not None and (last != self._length - 1 if self._length is not None else self._cut_seen):
            last = None  # not the transcript's last message (a cut left an older one known): unknown
        return RecentRows({e.segment: e for e in newest}, {last: known.messages[last]} if last is not None else {})

    def prefetch(self, events: Sequence[Any]) -> None:
        """Reads at once what folding `events` will ask of the stored rows, where a backend
        can (`PostgresBufferedRows`: an edit's); here nothing."""

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
        self._known = None

    # reads: held writes first
    def head(self) -> Head | None:
        return self._head if self._head is not None else super().head()

    def put_head(self, head: Head) -> None:
        self._head = head

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

    def put_entry(self, entry: Entry) -> None:
        opened = self._open_entry
        if opened is not None and opened != entry.seq:
            held = self._entries.get(opened)
            if isinstance(held, Entry):
                self._entries[opened] = (held.segment, _entry_json(held))
        self._entries[entry.seq] = entry
        self._segments[entry.segment] = entry.seq
        self._open_entry = entry.seq

    def delete_entries(self, seqs: Iterable[int]) -> None:
        for seq in seqs:  # a stored entry's segment need not be read: `entry` checks the held seqs
            held = self._entries.get(seq)
            if held is not None:
                self._segments[held[0] if isinstance(held, tuple) else held.segment] = None
            self._entries[seq] = None

    def set_aside(self, seqs: Iterable[int]) -> None:
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

    def _set_aside_rows(self) -> None:
        """Writes what `drop_aside` and `set_aside` hold (at the flush, before the entries)."""
        if self._drop_aside:
            SQLRows.drop_aside(self)
        self._many(
            f"UPDATE {self.t['entries']} SET cid = ? WHERE cid = ? AND seq = ?",
            [(self.aside_cid, self.cid, seq) for seq in self._moves],
        )
        self._many(
            f"INSERT INTO {self.t['entries']} (cid, seq, segment, body) VALUES (?, ?, ?, ?)",
            [(self.aside_cid, *row) for row in self._aside],
        )

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        self._outcomes.extend((o.seq[0], o.seq[1], o.card, o.after, o.model_dump_json()) for o in outcomes)

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
        return message.role, message.number, self._message_body(message, self._sealer())

    def put_message(self, index: int, message: Message) -> None:
        opened = self._open_message
        if opened is not None and opened != index:
            held = self._messages.get(opened)
            if isinstance(held, Message):
                self._messages[opened] = self._message_row(held)
        self._messages[index] = message
        self._open_message = index

    def end_block(self, index: int, end: int | None) -> None:
        self._ends[index] = end

    def put_page(self, message: int, page: int) -> None:
        self._pages[message] = page

    def put_turn(self, turn: TurnMark) -> None:
        self._turns.append((turn.version, turn.message, turn.at.isoformat()))

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

    def _stored_message(self, index: int) -> Message | None:
        """The stored transcript message at `index` (a read), for `message`."""
        return SQLRows.message(self, index)

    def cut_messages(self, keep: int) -> None:
        """Holds the cut (the stored messages from `keep` on go at the flush, before the held
        messages are written) and drops the held messages and block ends from `keep` on, and
        the known ones (`recent` then knows the last message only where it is the head's)."""
        if self._known is not None:
            for index in [i for i in self._known.messages if i >= keep]:
                del self._known.messages[index]
        self._cut = keep if self._cut is None else min(self._cut, keep)
        self._cut_seen = True
        self._messages = {i: m for i, m in self._messages.items() if i < keep}
        self._ends = {i: e for i, e in self._ends.items() if i < keep}
        if self._open_message is not None and self._open_message >= keep:
            self._open_message = None

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        self.flush()
        self._unknown()
        return super().cut_pages(after)

    def clear(self) -> None:
        self.flush()
        self._unknown()
        super().clear()

    def _write_head(self, head: Head) -> None:
        """Writes the held head (at the flush)."""
        SQLRows.put_head(self, head)

    def _many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) == 1:  # psycopg's executemany syncs a pipeline (a round trip); one row need not
            self.curs.execute(sql.replace("?", self.p), rows[0])
        elif rows:
            self.curs.executemany(sql.replace("?", self.p), rows)

    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], tail: str) -> None:
        """Inserts `rows` (values of `columns` after `cid`) into `table`, `tail` being the
        statement's ON CONFLICT clause: one `executemany` (SQLite runs it in C)."""
        marks = ", ".join("?" * (len(columns) + 1))
        self._many(f"INSERT INTO {table} (cid, {', '.join(columns)}) VALUES ({marks}) {tail}", [(self.cid, *row) for row in rows])

    def _cut_stored_messages(self, keep: int) -> None:
        """Deletes the stored transcript messages from index `keep` on (at the flush, before the
        held messages are written)."""
        SQLRows.cut_messages(self, keep)

    def _delete_entries(self, seqs: list[int]) -> None:
        self._many(f"DELETE FROM {self.t['entries']} WHERE cid = ? AND seq = ?", [(self.cid, seq) for seq in seqs])

    def _end_blocks(self, ends: list[tuple[int, int | None]]) -> None:
        self._many(
            f"UPDATE {self.t['messages']} SET block_end = ? WHERE cid = ? AND idx = ?",
            [(end, self.cid, index) for index, end in ends],
        )

    def flush(self) -> None:
        """Sends the held writes: per table one bulk statement (`_insert_many`); a held message
        goes out with the block end held for it, so only a stored message's end is an UPDATE."""
        t = self.t
        entries = []
        for seq, held in self._entries.items():
            if isinstance(held, Entry):
                held = (held.segment, _entry_json(held))
            if held is not None:
                entries.append((seq, *held))
        self._remember()
        self._set_aside_rows()
        self._delete_entries([seq for seq, held in self._entries.items() if held is None])
        self._insert_many(
            t["entries"], ("seq", "segment", "body"), entries, "ON CONFLICT (cid, seq) DO UPDATE SET body = excluded.body"
        )
        self._insert_many(t["outcomes"], ("v", "sub", "card", "after", "body"), self._outcomes, "")
        if self._cut is not None:
            self._cut_stored_messages(self._cut)
        messages, ends = sorted(self._messages.items()), self._ends
        rows = [(i, *(held if isinstance(held, tuple) else self._message_row(held))) for i, held in messages]
        upsert = "ON CONFLICT (cid, idx) DO UPDATE SET role = excluded.role, number = excluded.number, body = excluded.body"
        self._insert_many(
            t["messages"],
            ("idx", "role", "number", "body"),  # block_end: NULL when new, else kept
            [row for row in rows if row[0] not in ends],
            upsert,
        )
        self._insert_many(
            t["messages"],
            ("idx", "role", "number", "block_end", "body"),  # with the end held for it
            [(i, role, number, ends[i], body) for i, role, number, body in rows if i in ends],
            upsert + ", block_end = excluded.block_end",
        )
        self._end_blocks([(i, end) for i, end in ends.items() if i not in self._messages])  # ends of stored messages
        self._insert_many(
            t["pages"],
            ("message", "page"),
            list(self._pages.items()),
            "ON CONFLICT (cid, message) DO UPDATE SET page = excluded.page",
        )
        self._insert_many(t["turns"], ("version", "message", "at"), self._turns, "ON CONFLICT (cid, version) DO NOTHING")
        if self._head is not None:
            self._write_head(self._head)
            self._length = self._head.length
        self._entries, self._segments, self._outcomes = {}, {}, []
        self._drop_aside, self._moves, self._aside = False, [], []
        self._messages, self._ends, self._pages, self._turns, self._head = {}, {}, {}, [], None
        self._cut = None
        self._open_entry = self._open_message = None


_ENTRY_JSON = Entry.__pydantic_serializer__


def _entry_json(entry: Entry) -> str:
    """Returns `entry.model_dump_json()` (its serializer called directly)."""
    return _ENTRY_JSON.to_json(entry).decode()
