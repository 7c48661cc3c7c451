"""`replay --at N` of a stored conversation (issue 25, item 4): the read models' turns table
names the events that started the turns of message N, and only the log up to the newest of
them is read and folded. What it returns is what the fold of the whole log gives, for every N
of the demo tour and of a conversation with retries and edits, on every backend; an N that
started no turn names the messages that did; a broken chain among the events read is said."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store, open_store
from adapters.service.export import export_lines
from adapters.service.replay import Replay, TurnNotFound, no_turn_among
from adapters.service.timeline import turn_at, turn_view
from adapters.store.chain import CHAIN_TABLE
from adapters.store.crypto import ERASED
from adapters.store.verify import chain_verdict_upto
from domain.events import conversation_uuid
from projections.turn import turns_of
from projections.turn_compare import TurnMissing, compare_turns

sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
from factories import SKILL, Chat, model_round

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"
EDITED = "conv-edited"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def chat(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    """Yields a Chatrecord on a new, empty store of each backend."""
    if request.param == "memory":
        store = open_store(memory=True)
    elif request.param == "sqlite":
        store = build_store(sqlite_env(tmp_path / "store.sqlite"))
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"})
    chatrecord = Chatrecord(store)
    yield chatrecord
    chatrecord.close()


def edited_and_retried(later: int = 0) -> list[str]:
    """Returns the lines of a conversation whose message 1 is typed, retried and edited (three
    turns of it), whose message 2 is typed, cut by that edit, typed anew and retried (three
    turns), and then `later` plain turns (messages 3 on)."""
    chat = Chat(conversation=EDITED)
    chat.user("Eins", page=42, skill=SKILL)
    chat.segment("turn", "completed", "Antwort eins", [*model_round(1)], run="a")
    chat.retry(1)
    chat.segment("turn", "completed", "Antwort eins, noch einmal", [*model_round(1)], run="b")
    chat.user("Zwei", page=42)
    chat.segment("turn", "failed", None, [], run="c")
    chat.edit(1, "Eins, anders")
    chat.segment("turn", "completed", "Antwort auf das andere", [*model_round(1)], run="d")
    chat.user("Zwei, neu", page=7)
    chat.segment("turn", "completed", "Antwort zwei", [*model_round(1)], run="e")
    chat.retry(2)
    chat.segment("turn", "completed", "Antwort zwei, noch einmal", [*model_round(1)], run="f")
    for n in range(later):
        chat.user(f"Später {n}", page=42)
        chat.segment("turn", "completed", f"Antwort {n}", [*model_round(1)], run=f"g{n}")
    return [json.dumps(line) for line in export_lines(chat.events).lines]


def whole_log(chat: Chatrecord, conversation: str, at: int, rules: str) -> Replay | TurnNotFound:
    """Returns what `replay --at` returned before the turns table was read: `turns_of` over the
    whole log (the turns, or the error naming the messages that started turns)."""
    turns, _, started = turns_of(chat.events(conversation), at, rules)
    return Replay(conversation, rules, tuple(turns)) if turns else no_turn_among(at, started)


def replayed(chat: Chatrecord, conversation: str, at: int, rules: str | None = None) -> Replay | TurnNotFound:
    try:
        return chat.replay(conversation, rules, at=at)
    except TurnNotFound as error:
        return error


def same(got: Replay | TurnNotFound, expected: Replay | TurnNotFound) -> bool:
    if isinstance(expected, TurnNotFound):
        return isinstance(got, TurnNotFound) and str(got) == str(expected)
    return isinstance(got, Replay) and json.dumps(got.to_json()) == json.dumps(expected.to_json()) and not got.differs


@pytest.mark.parametrize("rules", ["2026-11-02", "transcript-only"])
def test_every_n_of_the_demo_and_of_an_edited_conversation_replays_as_the_whole_log_does(chat: Chatrecord, rules: str) -> None:
    chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chat.ingest(edited_and_retried(later=3), "edited.jsonl")
    shown: dict[str, list[Any]] = {}
    for conversation, messages in (("conv-demo-seo", 8), (EDITED, 7)):
        for at in range(1, messages + 1):
            got, expected = replayed(chat, conversation, at, rules), whole_log(chat, conversation, at, rules)
            assert same(got, expected), (conversation, at)
            shown.setdefault(conversation, []).append(len(got.turns) if isinstance(got, Replay) else None)
    assert shown == {"conv-demo-seo": [1, None, 1, None, None, None, None, None], EDITED: [3, 3, 1, 1, 1, None, None]}


def test_the_turns_of_an_edited_and_retried_message_are_all_returned_as_each_saw_it(chat: Chatrecord) -> None:
    chat.ingest(edited_and_retried(later=2), "edited.jsonl")

    first = chat.replay(EDITED, at=1)

    assert [t.message for t in first.turns] == [1, 1, 1]
    assert [t.messages[0].text for t in first.turns] == ["Eins", "Eins", "Eins, anders"]
    assert [len(t.messages) for t in first.turns] == [1, 2, 1]  # the retry saw the first answer; the edit cut it
    assert [[e.segment for e in t.record] for t in first.turns] == [[], ["a/1"], []]  # the edit took the cut turns' record
    assert (first.differs, first.chain) == (False, None)


def test_an_n_that_started_no_turn_names_the_messages_that_did(chat: Chatrecord) -> None:
    chat.ingest(edited_and_retried(later=2), "edited.jsonl")

    with pytest.raises(TurnNotFound) as missing:
        chat.replay(EDITED, at=9)

    assert str(missing.value) == "--at 9: no turn starts at user message 9; turns start at messages 1, 2, 3, 4"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_replay_at_1_reads_only_the_events_up_to_its_turns(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend == "sqlite":
        store = build_store(sqlite_env(tmp_path / "store.sqlite"))
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"})
    chat = Chatrecord(store)
    try:
        chat.ingest(edited_and_retried(later=200), "edited.jsonl")
        whole = chat.events(EDITED)
        expected, _, _ = turns_of(whole, 1, "2026-11-02")
        reads: list[tuple[int | None, int]] = []
        select = store.recorder.select_events

        def counted(originator_id: Any, **kwargs: Any) -> list[Any]:
            got = select(originator_id, **kwargs)
            reads.append((kwargs.get("lte"), len(got)))
            return got

        monkeypatch.setattr(store.recorder, "select_events", counted)
        first, latest = chat.replay(EDITED, at=1), chat.replay(EDITED, at=202)
    finally:
        chat.close()

    assert len(whole) == 415
    # message 1's third turn (the edit's cut) is event 10; message 202's only turn is the latest,
    # read from the rows as the chat's turn read builds it: no event read. The events read once,
    # for the fold and for their chain's check
    assert reads == [(10, 10)]
    assert [t.to_json() for t in first.turns] == [t.to_json() for t in expected]
    assert [t.message for t in latest.turns] == [202] and not latest.differs


def test_a_changed_event_among_those_read_is_said_one_after_them_is_not(tmp_path: Path) -> None:
    """The demo's message 1 started its turn at version 3; message 3 is its latest turn."""
    path = tmp_path / "store.sqlite"
    chat = Chatrecord(build_store(sqlite_env(path)))
    chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chat.close()

    def tamper(version: int, before: str, after: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE stored_events SET state = replace(state, ?, ?) WHERE originator_version = ?",
                (before.encode(), after.encode(), version),
            )
        conn.close()

    tamper(8, '"uid":42}', '"uid":7}')
    reopened = Chatrecord(build_store(sqlite_env(path)))
    first, latest = reopened.replay("conv-demo-seo", at=1), reopened.replay("conv-demo-seo", at=3)
    reopened.close()
    tamper(3, '"page":42,', '"page":7,')
    again = Chatrecord(build_store(sqlite_env(path)))
    changed = again.replay("conv-demo-seo", at=1)
    again.close()

    assert (first.differs, first.chain) == (False, None)  # version 8 lies after the events turn 1 read
    assert latest.broken and latest.chain is not None and (latest.chain.version, latest.chain.problem) == (8, "changed")
    assert changed.broken and changed.chain is not None and (changed.chain.version, changed.chain.problem) == (3, "changed")
    assert changed.turns[0].view_context.page_id == 7  # the log's turn, as it reads now


def test_the_chain_of_the_events_read_once_has_the_verdict_of_a_read_of_its_own(tmp_path: Path) -> None:
    """`chain_verdict_upto` given the events `replay --at` read (checked without reading them
    again, their hashes in one read) says what it says reading them itself, at every version:
    intact; with version 5's bytes changed (broken from 5 on, ok before); with version 12's
    hash deleted (an event without a hash from 12 on)."""

    def store_at(name: str, tamper: str | None = None) -> Path:
        path = tmp_path / name
        chat = Chatrecord(build_store(sqlite_env(path)))
        chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
        chat.close()
        if tamper is not None:
            with sqlite3.connect(path) as conn:
                conn.execute(tamper)
            conn.close()
        return path

    def verdicts(path: Path) -> list[tuple[bool, int, str | None]]:
        store = build_store(sqlite_env(path))
        try:
            key = conversation_uuid("conv-demo-seo")
            found = []
            for version in range(1, 21):
                read = store.recorder.select_events(key, lte=version)
                ours = chain_verdict_upto(store, "conv-demo-seo", version, read)
                assert ours == chain_verdict_upto(store, "conv-demo-seo", version)
                assert ours is not None
                found.append((ours.ok, ours.version, ours.problem))
            return found
        finally:
            store.close()

    intact = verdicts(store_at("intact.sqlite"))
    changed = verdicts(
        store_at("changed.sqlite", "UPDATE stored_events SET state = replace(state, X'61', X'62') WHERE originator_version = 5")
    )
    unhashed = verdicts(store_at("unhashed.sqlite", f"DELETE FROM {CHAIN_TABLE} WHERE originator_version = 12"))

    assert intact == [(True, v, None) for v in range(1, 21)]
    assert changed == [(True, v, None) for v in range(1, 5)] + [(False, 5, "changed")] * 16
    assert unhashed == [(True, v, None) for v in range(1, 12)] + [(False, 12, "inserted")] * 9


@pytest.mark.parametrize("at", [0, 2**31, 2**63, 10**20])
def test_an_n_beyond_every_message_number_is_no_turn_on_every_backend(chat: Chatrecord, at: int) -> None:
    """A message number is 1 to 2**31 - 1: a larger `--at` (past SQLite's 64-bit integers too:
    a fresh user's `--at 9223372036854775808` printed an OverflowError) names the messages
    that started turns, as any `at` that started none."""
    chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)

    with pytest.raises(TurnNotFound) as missing:
        chat.replay("conv-demo-seo", at=at)

    assert str(missing.value) == f"--at {at}: no turn starts at user message {at}; turns start at messages 1, 3"


def viewed(chat: Chatrecord, conversation: str, at: int, rules: str) -> dict[str, Any] | str:
    """The page's `?turn=N` (`Chatrecord.turn_view`): its turn and differences, or the error."""
    try:
        view = chat.turn_view(conversation, at, rules)
    except TurnNotFound as error:
        return str(error)
    return {"turn": view.turn.to_json(), "added": sorted(view.added), "removed": view.removed, "line": view.system_differs}


def viewed_from_the_whole_log(chat: Chatrecord, conversation: str, at: int, rules: str) -> dict[str, Any] | str:
    """`turn_view` as it was before the turns table was read: `turn_at` over the whole log."""
    events, live = chat.events(conversation), chat.active_rules()
    try:
        chosen = turn_at(events, at, rules)
    except TurnNotFound as error:
        return str(error)
    view = turn_view(chosen, rules, chosen if rules == live else turn_at(events, at, live), live)
    return {"turn": view.turn.to_json(), "added": sorted(view.added), "removed": view.removed, "line": view.system_differs}


def compared(chat: Chatrecord, conversation: str, first: int, second: int, events: list[Any] | None = None) -> Any:
    """Two turns compared (`Chatrecord.compare_turns`, or the fold of `events`), or the error."""
    try:
        if events is None:
            return chat.compare_turns(conversation, first, second)
        return compare_turns(events, chat.active_rules(), first, second)
    except TurnMissing as error:
        return str(error)


@pytest.mark.parametrize("rules", ["2026-11-02", "transcript-only"])
def test_a_turns_view_and_two_turns_compared_are_what_the_whole_log_gives(chat: Chatrecord, rules: str) -> None:
    """The page's `?turn=N` and its compare read the log up to the turns they show (issue 39):
    every N of the demo and of a conversation with retries and edits, each pair compared, and
    the messages that started no turn, as the fold of the whole log gives them."""
    chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chat.ingest(edited_and_retried(later=3), "edited.jsonl")
    for conversation, messages in (("conv-demo-seo", 4), (EDITED, 6)):
        whole = chat.events(conversation)
        for at in range(1, messages + 1):
            assert viewed(chat, conversation, at, rules) == viewed_from_the_whole_log(chat, conversation, at, rules), (
                conversation,
                at,
            )
            for other in range(1, messages + 1):
                assert compared(chat, conversation, at, other) == compared(chat, conversation, at, other, whole), (at, other)
    assert isinstance(viewed(chat, EDITED, 2, rules), dict) and isinstance(viewed(chat, "conv-demo-seo", 2, rules), str)


def test_an_erased_conversations_old_turn_reads_erased_as_its_whole_log_does(chat: Chatrecord) -> None:
    chat.ingest(edited_and_retried(later=2), "edited.jsonl")
    chat.erase(EDITED)

    got = viewed(chat, EDITED, 1, "2026-11-02")

    assert got == viewed_from_the_whole_log(chat, EDITED, 1, "2026-11-02")
    assert isinstance(got, dict) and got["turn"]["messages"][-1]["content"].endswith(ERASED)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_old_turns_view_and_compare_read_only_the_events_up_to_those_turns(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend == "sqlite":
        store = build_store(sqlite_env(tmp_path / "store.sqlite"))
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"})
    chat = Chatrecord(store)
    try:
        chat.ingest(edited_and_retried(later=200), "edited.jsonl")
        expected = viewed_from_the_whole_log(chat, EDITED, 1, "transcript-only")
        expected_compare = compared(chat, EDITED, 1, 3, chat.events(EDITED))
        reads: list[int | None] = []
        select = store.recorder.select_events

        def counted(originator_id: Any, **kwargs: Any) -> list[Any]:
            got = select(originator_id, **kwargs)
            reads.append(kwargs.get("lte"))
            return got

        monkeypatch.setattr(store.recorder, "select_events", counted)
        first = viewed(chat, EDITED, 1, "transcript-only")
        both = compared(chat, EDITED, 1, 3)
    finally:
        chat.close()

    # message 1's latest turn (the edit's cut) starts at event 10, message 3's at event 16
    assert reads == [10, 16]
    assert first == expected and both == expected_compare
