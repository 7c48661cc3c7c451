"""Entries and card outcomes decoded once per body, notes rendered once per page check
(`adapters.views.caches.NotesCache`): what a turn read keeps must be what it would
render again, and a note kept under one page check is never served under another."""

from __future__ import annotations

from factories import Chat, seo_tour

from adapters.views.caches import MESSAGE_BODY, MessagesCache, NotesCache
from adapters.views.log_fold import fold_into
from adapters.views.memory_rows import MemoryConversation, MemoryRows
from projections.notes import note_of
from projections.page_line import PageFilter, every_page
from projections.rules import resolve
from projections.transcript import Message


def _tour_items():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Überspringen", "Übernehmen"])
    rows = MemoryRows(MemoryConversation())
    fold_into(rows, None, chat.events, resolve("2026-11-02"))
    return rows.entries(), rows.outcomes()


def test_a_body_decodes_once_to_the_same_entry_or_outcome():
    entries, outcomes = _tour_items()
    rendered = NotesCache()
    body = entries[-1].model_dump_json()
    first = rendered.entry(body)
    assert first == entries[-1]
    assert rendered.entry(body) is first
    outcome_body = outcomes[0].model_dump_json()
    assert rendered.outcome(outcome_body) == outcomes[0]
    assert rendered.outcome(outcome_body) is rendered.outcome(outcome_body)


def test_a_kept_note_is_the_note_rendered_again():
    entries, outcomes = _tour_items()
    rendered = NotesCache()
    note = rendered.note("every")
    for item in [*entries, *outcomes]:
        decoded = (rendered.entry if item in entries else rendered.outcome)(item.model_dump_json())
        first = note(decoded, every_page)
        assert first == note_of(item, every_page)
        assert note(decoded, every_page) is first


def test_a_note_kept_under_one_page_check_is_not_served_under_another():
    _, outcomes = _tour_items()
    rendered = NotesCache()
    outcome = rendered.outcome(outcomes[0].model_dump_json())  # the title card on pages:42
    hidden = PageFilter(hidden=frozenset({42}))
    shown = rendered.note("every")(outcome, every_page).body
    kept_hidden = rendered.note(hidden)(outcome, hidden).body
    assert "pages:42" in shown
    assert "pages:42" not in kept_hidden
    assert kept_hidden == note_of(outcome, hidden).body
    assert rendered.note("every")(outcome, every_page).body == shown


def test_a_kept_message_is_the_one_decoded_from_its_body_and_a_long_body_is_not_kept():
    kept = MessagesCache(size=2)
    short, long = Message(role="user", text="kurz", number=1), Message(role="assistant", text="x" * MESSAGE_BODY)
    kept.put("c1", short.model_dump_json(), short)
    kept.put("c1", long.model_dump_json(), long)
    assert kept.get("c1", short.model_dump_json()) is short
    assert kept.get("c2", short.model_dump_json()) is None  # another conversation's rows
    assert kept.get("c1", long.model_dump_json()) is None
    for n in range(3):  # at most `size` kept
        kept.put("c1", f"body {n}", short)
    assert kept.get("c1", short.model_dump_json()) is None
