"""The timeline's service reads: a page reads the log's tail only, yet its rows are the audit's
rows of those turns exactly (cut flags of later edits included), page after page; the turn view
is replay's turn with the differences from the live rule set."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.service import timeline as timeline_module
from adapters.store.crypto import ERASED
from domain.errors import UnknownConversation
from projections.audit import audit
from tests.application.test_service import DEMO
from tests.integration.test_readmodels import Lines, behalten_tour, model_round


def chat_of(turns: int, conversation: str = "conv-long") -> list[dict[str, Any]]:
    """A chat of `turns` user messages, each with two segments (a card approved between), a
    page change every fourth turn, an edit of message 3 that cuts what followed it."""
    chat = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    for n in range(1, turns + 1):
        chat.add("user_message", message=n, text=f"Frage {n}", page=42 + n // 4)
        chat.add(
            "segment_returned",
            segment=f"r{n}/1",
            run=f"r{n}",
            trigger="turn",
            outcome="awaiting_approval",
            answer=f"Vorschlag {n}",
            steps=model_round(1),
            pending=[{"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": ["title"]}],
        )
        chat.add("card_decided", segment=f"r{n}/1", approved=n % 3 != 0, answer="Übernehmen" if n % 3 else "abgelehnt")
        chat.add(
            "segment_returned",
            segment=f"r{n}/2",
            run=f"r{n}",
            trigger="approval",
            outcome="completed",
            answer=f"Erledigt {n}",
            steps=model_round(2),
        )
        if n == 5:
            chat.add("message_edited", message=3, text="Frage 3, anders")
            chat.add(
                "segment_returned",
                segment="r3b/1",
                run="r3b",
                trigger="turn",
                outcome="completed",
                answer="Neu",
                steps=model_round(1),
            )
    return chat.lines


@pytest.fixture
def chatrecord() -> Chatrecord:
    return Chatrecord(open_store(memory=True))


def stored(chatrecord: Chatrecord, lines: list[dict[str, Any]]) -> None:
    report = chatrecord.ingest([orjson.dumps(line) for line in lines], "test")
    assert report.stopped is None, report.stopped


def every_page(chatrecord: Chatrecord, conversation: str, turns: int) -> list[Any]:
    pages, before = [], None
    while True:
        page = chatrecord.timeline(conversation, before=before, turns=turns)
        pages.append(page)
        if page.before is None:
            return pages
        assert before is None or page.before < before
        before = page.before


@pytest.mark.parametrize("turns", [1, 2, 3, 20])
@pytest.mark.parametrize("conversation", ["conv-demo-seo", "conv-behalten", "conv-long"])
def test_the_pages_of_a_timeline_hold_the_audits_rows_exactly(
    chatrecord: Chatrecord, conversation: str, turns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_module, "CHUNK", 5)  # read backwards in small steps, as a long log is read
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    stored(chatrecord, behalten_tour())
    stored(chatrecord, chat_of(12))

    pages = every_page(chatrecord, conversation, turns)

    rows = [row for page in reversed(pages) for turn in reversed(page.turns) for row in turn.rows]
    assert rows == audit(chatrecord.events(conversation), chatrecord.active_rules())
    assert all(len(page.turns) <= turns for page in pages)


def test_a_page_shows_turns_newest_first_with_their_texts_pages_and_activity(chatrecord: Chatrecord) -> None:
    stored(chatrecord, chat_of(12))

    page = chatrecord.timeline("conv-long", turns=5)

    assert [(t.kind, t.number, t.page, t.page_before) for t in page.turns] == [
        ("message", 12, 45, 44),
        ("message", 11, 44, None),
        ("message", 10, 44, None),
        ("message", 9, 44, None),
        ("message", 8, 44, 43),
    ]
    assert page.turns[0].text is not None and page.turns[0].text.text == "Frage 12"
    assert [e.label for e in page.turns[1].activity["r11/1"]] == ["Von dir freigegeben: Übernehmen"]
    assert [e.label for e in page.turns[3].activity["r9/1"]] == ["Von dir abgelehnt: abgelehnt"]
    assert page.before == page.turns[-1].version


def test_an_erased_conversations_texts_show_as_erased(chatrecord: Chatrecord) -> None:
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chatrecord.erase("conv-demo-seo")

    page = chatrecord.timeline("conv-demo-seo")

    messages = [t for t in page.turns if t.kind == "message"]
    assert [(t.text.text, t.text.erased) for t in messages if t.text] == [(ERASED, True), (ERASED, True)]
    assert page.turns[0].rows[-1].kind == "erased"


def test_the_turn_view_is_replays_turn_with_the_notes_another_rule_set_drops(chatrecord: Chatrecord) -> None:
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)

    live = chatrecord.turn_view("conv-demo-seo", 3)
    bare = chatrecord.turn_view("conv-demo-seo", 3, "transcript-only")

    assert live.turn.to_json() == chatrecord.replay("conv-demo-seo", at=3).turns[-1].to_json()
    assert (len(live.turn.notes), live.added, live.removed) == (14, frozenset(), ())
    assert bare.turn.to_json() == chatrecord.replay("conv-demo-seo", "transcript-only", at=3).turns[-1].to_json()
    assert (bare.turn.notes, bare.added, bare.removed) == ((), frozenset(), live.turn.notes)


def test_an_unknown_conversation_has_no_timeline(chatrecord: Chatrecord) -> None:
    with pytest.raises(UnknownConversation, match="no conversation 'conv-nope'"):
        chatrecord.timeline("conv-nope")
    with pytest.raises(UnknownConversation):
        chatrecord.overview("conv-nope")


def test_the_kept_overview_folds_only_new_events_and_equals_a_fold_of_the_whole_log(
    chatrecord: Chatrecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept per conversation: a request after new lines (an edit among them, which marks earlier
    rows cut) folds those lines only, and gives what one fold of the whole log gives; an
    unchanged conversation is drawn once."""
    lines = chat_of(8)
    cut = next(i for i, line in enumerate(lines) if line["type"] == "message_edited")
    stored(chatrecord, lines[: cut - 2])
    first = chatrecord.overview("conv-long")
    version = len(chatrecord.events("conv-long"))
    folded: list[int] = []
    original = timeline_module.audit.fold

    def counting(state: Any, events: Any, rules: Any, **options: Any) -> Any:
        events = list(events)
        folded.extend(e.originator_version for e in events)
        return original(state, events, rules, **options)

    monkeypatch.setattr(timeline_module.audit, "fold", counting)
    stored(chatrecord, lines[cut - 2 :])
    after = chatrecord.overview("conv-long")
    events = chatrecord.events("conv-long")

    assert folded == [e.originator_version for e in events if e.originator_version > version] and folded
    assert after == timeline_module.overview(events, chatrecord.active_rules())
    assert any(p.tone == "cut" for p in after) and not any(p.tone == "cut" for p in first)
    drawn: list[int] = []

    def draw(points: list[Any]) -> str:
        drawn.append(len(points))
        return f"<svg>{len(points)}</svg>"

    assert (
        chatrecord.overview_drawn("conv-long", draw) == chatrecord.overview_drawn("conv-long", draw) == f"<svg>{len(after)}</svg>"
    )
    assert drawn == [len(after)]
