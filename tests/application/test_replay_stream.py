"""`replay` streamed turn by turn (issue 39, item 1): the whole turns, a range of user messages, a
page of turns with its cursor and the `--changes` form, on every backend. What the stream writes
is what `Chatrecord.replay` returns; the changes, read by the reference reader, give the whole
turns back; and the changes of a whole history grow with its length, not with its square."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.api import BadReplayCursor, Chatrecord, TurnRange, replay_start
from domain.errors import UnknownConversation
from projections.turn_changes import Rebuilt
from tests.application import test_replay_at
from tests.application.test_replay_at import DEMO, EDITED, edited_and_retried

BEHALTEN = DEMO.parent / "behalten_tour.jsonl"
chat = test_replay_at.chat  # the fixture: a Chatrecord on a new, empty store of each backend


def streamed(chat: Chatrecord, conversation: str, rules: str | None = None, **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    stream = chat.replay_stream(conversation, rules, **kwargs)
    return list(stream.turns), stream


def filled(chat: Chatrecord, later: int = 12) -> None:
    chat.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chat.ingest(BEHALTEN.read_bytes().splitlines(), BEHALTEN.name)
    chat.ingest(edited_and_retried(later=later), "edited.jsonl")


@pytest.mark.parametrize("rules", [None, "transcript-only", "2026-11-01"])
def test_the_stream_writes_the_replay_s_turns_and_the_changes_give_them_back(chat: Chatrecord, rules: str | None) -> None:
    filled(chat)
    counted = {}
    for conversation in ("conv-demo-seo", "conv-behalten", EDITED):
        whole = chat.replay(conversation, rules).to_json()["turns"]
        turns, stream = streamed(chat, conversation, rules)
        changes, _ = streamed(chat, conversation, rules, form="changes")
        reader = Rebuilt()
        assert turns == whole and [reader.turn(c) for c in changes] == whole, conversation
        assert (stream.differs, stream.chain, stream.next_cursor) == (False, None, None)
        counted[conversation] = len(turns)
    assert counted == {"conv-demo-seo": 2, "conv-behalten": 2, EDITED: 18}


def test_a_range_of_messages_keeps_their_turns_and_changes_count_from_the_turn_before(chat: Chatrecord) -> None:
    filled(chat)
    whole = chat.replay(EDITED).to_json()["turns"]

    picked, _ = streamed(chat, EDITED, span=TurnRange(first=2, last=4))
    changes, _ = streamed(chat, EDITED, form="changes")
    ranged, _ = streamed(chat, EDITED, form="changes", span=TurnRange(first=3, last=3))

    assert [t["message"] for t in picked] == [2, 2, 2, 3, 4]  # message 2 typed, cut and typed anew, retried
    assert picked == [t for t in whole if 2 <= t["message"] <= 4]
    assert ranged == [c for c in changes if c["message"] == 3]  # counted from the turn before, not shown
    assert ranged[0]["kept"] > 0 and len(ranged[0]["appended"]) == 2  # the answer before it and its own message
    with pytest.raises(ValueError, match="--from 4 is after --to 2"):
        chat.replay_stream(EDITED, span=TurnRange(first=4, last=2))


def test_pages_of_turns_follow_their_cursors_to_the_whole_history(chat: Chatrecord) -> None:
    filled(chat)
    whole = chat.replay(EDITED).to_json()["turns"]
    reader, pages, rebuilt, cursor = Rebuilt(), [], [], None
    while True:
        changes, stream = streamed(chat, EDITED, form="changes", span=TurnRange(start=replay_start(cursor), limit=5))
        pages.append(len(changes))
        rebuilt += [reader.turn(c) for c in changes]
        cursor = stream.next_cursor
        if cursor is None:
            break
    assert pages == [5, 5, 5, 3] and rebuilt == whole
    page, stream = streamed(chat, EDITED, span=TurnRange(start=15, limit=5))
    assert page == whole[15:] and stream.next_cursor is None
    assert streamed(chat, EDITED, span=TurnRange(start=10, limit=5))[1].next_cursor == "t15"
    with pytest.raises(BadReplayCursor, match="not a cursor of the replay"):
        replay_start("c15")
    with pytest.raises(UnknownConversation, match="no conversation 'nope'"):
        chat.replay_stream("nope")


def test_a_whole_history_s_changes_grow_with_its_length_its_whole_turns_with_its_square(chat: Chatrecord) -> None:
    chat.ingest(edited_and_retried(later=40), "edited.jsonl")
    short = [json.dumps(t) for t in streamed(chat, EDITED, span=TurnRange(last=22))[0]]
    short_changes = [json.dumps(t) for t in streamed(chat, EDITED, form="changes", span=TurnRange(last=22))[0]]
    long = [json.dumps(t) for t in streamed(chat, EDITED)[0]]
    long_changes = [json.dumps(t) for t in streamed(chat, EDITED, form="changes")[0]]

    assert (len(short), len(long)) == (26, 46)
    grows = sum(map(len, long_changes)) / sum(map(len, short_changes))
    squares = sum(map(len, long)) / sum(map(len, short))
    assert grows < 2.0 < squares, (grows, squares)  # 46/26 turns: 1.8 times the turns
    sizes = sorted(map(len, long_changes))
    assert sizes[-1] < 2 * sizes[len(sizes) // 2]  # no turn's changes cost much more than another's
