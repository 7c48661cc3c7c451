"""Mutated input lines for the fuzz tests (issue 8): every line type of the demo fixtures, with
numbers, times, ids, keys and sizes changed into what a hostile or broken chat could send.

`mutated_lines()` is a hypothesis strategy of (line as a dict, or as JSON text). `FuzzRun` feeds
lines through `adapters.api.Chatrecord.record` and checks after each one that only the
documented error family was raised, that a refused line stored nothing, and that every
conversation stored so far can still be read. `scripts/fuzz_input.py` runs it longer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from domain.errors import ChatrecordError

DATA = Path(__file__).resolve().parents[1] / "data"
TEMPLATES: list[dict[str, Any]] = [
    orjson.loads(raw)
    for name in ("demo_seo_tour.jsonl", "behalten_tour.jsonl")
    for raw in (DATA / name).read_bytes().splitlines()
    if raw.strip()
]
EXTRA = [  # line types the fixtures do not hold
    {"type": "turn_retried", "conversation": "conv-demo-seo", "at": "2026-10-31T14:06:00Z", "message": 3},
    {"type": "message_edited", "conversation": "conv-demo-seo", "at": "2026-10-31T14:07:00Z", "message": 1, "text": "SEO prüfen"},
    {"type": "conversation_started", "conversation": "conv-alt", "at": "2026-10-28T09:00:00Z", "kind": "alt_text", "owner": 3},
    {
        "type": "transcript_replaced",
        "conversation": "conv-alt",
        "at": "2026-10-28T09:00:01Z",
        "messages": [{"role": "user", "text": "Alt-Text?"}, {"role": "assistant", "text": "Ein Bild."}],
    },
    {
        "type": "legacy_row",
        "conversation": "conv-legacy",
        "at": "2026-10-28T09:00:01Z",
        "messages": [{"role": "user", "text": "alt"}],
        "card_outcomes": [{"outcome": "applied", "after": 0, "tool": "t", "table": "pages", "uid": 4, "fields": ["x"]}],
    },
    {"type": "tour_ended", "conversation": "conv-demo-seo", "at": "2026-10-31T14:08:00Z"},
]
LINES = TEMPLATES + EXTRA

NUMBERS = st.sampled_from(
    [
        0,
        -1,
        1,
        2**31 - 1,
        2**31,
        2**53 + 1,
        2**63 - 1,
        2**63,
        2**64 - 1,
        2**64,
        2**70,
        -(2**63),
        1.5,
        -0.0,
        1e308,
        -1e308,
        1e-308,
        float("inf"),
        float("nan"),
        3,
    ]
)
TIMES = st.sampled_from(
    [
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        "9998-12-31T23:59:59Z",
        "1999-12-31T23:59:59Z",
        "2000-01-01T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "",
        "yesterday",
        "2026-10-28T09:00:00+14:00",
        "2026-10-28T09:00:00",
        "2026-10-28T09:00:00.999999-12:00",
        "2026-10-28 09:00:00Z",
        "20261028T090000Z",
    ]
)
ODD_TEXT = st.sampled_from(
    [
        "",
        " ",
        "chat 17",
        "\x00",
        "\x1b[2J",
        "\u202e",
        "[Chat record",
        "〖Chat\u2062record",
        "С" * 200,
        "🙂" * 50,
        "a/b/../c",
        "\ud800x".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        "x" * 129,
        "nothingSaved",
        "Übernehmen",
        "awaiting_approval",
    ]
)
STRINGS = st.one_of(ODD_TEXT, st.text(max_size=60), st.integers(0, 3).map(lambda n: "y" * (10 ** (n + 2))))
VALUES = st.one_of(
    NUMBERS,
    TIMES,
    STRINGS,
    st.none(),
    st.booleans(),
    st.builds(list),
    st.builds(dict),
    st.lists(NUMBERS, max_size=3),
    st.builds(lambda: {"deep": [[[[]]]]}),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Returns the path of every key and list entry in `value` (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*at, key))
            found.extend(_paths(item, (*at, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value[:6]):
            found.append((*at, index))
            found.extend(_paths(item, (*at, index)))
    return found


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _parent(line: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        line = line[part]
    return line


@st.composite
def mutated_lines(draw: st.DrawFn) -> dict[str, Any] | str | bytes:
    """Returns one fixture line with 1–3 mutations, as a dict or (sometimes damaged) JSON text."""
    line = _copy(draw(st.sampled_from(LINES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(line)
        how = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add", "grow", "conversation"]))
        if how == "conversation":
            line["conversation"] = draw(
                st.one_of(ODD_TEXT, st.sampled_from(["conv-demo-seo", "conv-behalten", "conv-alt", "conv-legacy", "fuzz-1"]))
            )
            continue
        if how == "add" or not paths:
            line[draw(st.sampled_from(["follows", "flag", "extra", "pending", "steps", "skill", "segment"]))] = draw(VALUES)
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(line, path)
        if how == "drop":
            del parent[path[-1]]
        elif how == "grow" and isinstance(parent[path[-1]], list) and parent[path[-1]]:
            parent[path[-1]] = parent[path[-1]] * draw(st.sampled_from([2, 50, 20_001]))
        else:
            parent[path[-1]] = draw(VALUES)
    form = draw(st.sampled_from(["dict", "dict", "text", "damaged"]))
    if form == "dict":
        return line
    text = orjson.dumps(line, option=orjson.OPT_PASSTHROUGH_DATACLASS) if _encodable(line) else b"{"
    if form == "damaged":
        cut = draw(st.integers(0, max(0, len(text) - 1)))
        text = text[:cut] + draw(st.sampled_from([b"", b"\xff", b"}", b'"', b"\n{}", b"\x00"])) + text[cut:]
    return text


def _encodable(line: Any) -> bool:
    try:
        orjson.dumps(line)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


class FuzzRun:
    """A store holding the demo fixtures, fed one line after another, checked after each: a
    SQLite file `path` (which stores whole numbers in 64 bits, as PostgreSQL's columns in 32),
    or the library's in-memory store when None."""

    def __init__(self, path: Path | None = None, keep_going: bool = False, settings: dict[str, str] | None = None) -> None:
        if settings is not None:  # another store's settings (a PostgreSQL schema: scripts/fuzz_input.py)
            store = open_store(settings)
        else:
            store = open_store(memory=True) if path is None else open_store({"CHATRECORD_DB": str(path)})
        self.chat = Chatrecord(store)
        for line in TEMPLATES:
            self.chat.record(line)
        self.readable = ["conv-demo-seo", "conv-behalten"]
        self.counts: Counter[str] = Counter()
        self.keep_going = keep_going  # count a crash by its type instead of raising it

    def feed(self, line: dict[str, Any] | str | bytes) -> None:
        """Records `line`; raises AssertionError when anything but the documented error family
        comes out, a refused line stored something or a stored conversation cannot be read."""
        before = self.chat.store.max_notification_id()
        self.counts["inputs"] += 1
        try:
            result = self.chat.record(line)
        except ChatrecordError as error:
            self.counts["refused"] += 1
            self.counts[f"refused: {type(error).__name__}"] += 1
            assert self.chat.store.max_notification_id() == before, f"a refused line stored something: {error}"
        except Exception as error:
            self.counts["crashes"] += 1
            self.counts[f"crash: {type(error).__name__}: {str(error)[:60]}"] += 1
            if not self.keep_going:
                raise
        else:
            self.counts["accepted"] += 1
            if result.appended and result.conversation not in self.readable:
                self.readable.append(result.conversation)
        for conversation in self.readable:
            try:
                self.chat.turn_input(conversation)
                self.chat.activity(conversation)
            except ChatrecordError:  # a conversation with no turn yet
                pass
            except Exception as error:
                self.counts["unreadable"] += 1
                self.counts[f"unreadable: {type(error).__name__}: {str(error)[:60]}"] += 1
                if not self.keep_going:
                    raise
