"""The notes' budget: at most 40 notes and 6,000 characters; notes of empty steps go first,
then the oldest, and the first note then says that older notes exist."""

from __future__ import annotations

from factories import Chat, call, model_round, tool, write

from projections.notes import MAX_BODY, OLDER, OPEN
from projections.turn import build_turn_input


def conversation(empty: set[int], segments: int = 80) -> list:
    """Returns a conversation of `segments` turns; turn i's segment answers `Antwort i` and
    runs a tool unless i is in `empty`."""
    chat = Chat()
    for i in range(segments):
        chat.user(f"Frage {i}", page=42)
        steps = [*model_round(1)] if i in empty else [*model_round(1), tool("get_page", 1)]
        chat.segment("turn", "completed", f"Antwort {i}", steps, run=f"run{i}")
    chat.user("Was ist passiert?", page=42)
    return chat.events


def noted_segments(turn) -> list[int]:
    """Returns the turns whose assistant message carries a note, in order."""
    found = []
    for message in turn.model_messages():
        if message["role"] == "assistant" and OPEN in message["content"]:
            found.append(int(message["content"].split("\n")[0].removeprefix("Antwort ")))
    return found


def test_notes_of_a_long_conversation_stay_within_40_notes_and_6000_characters():
    turn = build_turn_input(conversation(empty={i for i in range(80) if i % 8 in (1, 4, 6)}))

    assert len(turn.notes) == 36  # the characters run out before the 40 notes do
    assert 6000 - 170 < sum(len(n) for n in turn.notes) <= 6000  # no further note (~165) fits


def test_over_the_budget_notes_of_empty_steps_go_first_then_the_oldest():
    empty = {i for i in range(80) if i % 8 in (1, 4, 6)}  # 30 empty steps, 50 that ran a tool
    turn = build_turn_input(conversation(empty))

    noted = noted_segments(turn)
    ran = [i for i in range(80) if i not in empty]
    assert not set(noted) & empty
    assert noted == ran[-36:]  # the 36 newest steps that ran a tool; the 14 oldest go


def test_when_the_steps_that_did_something_fit_only_the_oldest_empty_notes_go():
    did = {0, 9, 18, 27, 36, 45, 54, 63, 72, 79}
    turn = build_turn_input(conversation(empty=set(range(80)) - did))

    noted = noted_segments(turn)
    empties = [i for i in range(80) if i not in did]
    assert did <= set(noted)
    kept_empty = [i for i in noted if i not in did]
    assert kept_empty == empties[-28:]  # the 42 oldest empty steps go
    empty_note = min(len(n) for n in turn.notes if "Tools run: none" in n)
    total = sum(len(n) for n in turn.notes)
    assert len(turn.notes) == 38 and total + empty_note > 6000  # as many as the characters allow


def test_the_first_note_then_says_older_notes_exist_and_cannot_be_read():
    turn = build_turn_input(conversation(empty=set()))

    assert turn.notes[0].startswith(OPEN + OLDER)
    assert "cannot be read in this turn" in OLDER
    assert not any(OLDER in n for n in turn.notes[1:])


def test_within_the_budget_no_note_speaks_of_older_notes():
    turn = build_turn_input(conversation(empty=set(), segments=10))

    assert len(turn.notes) == 10
    assert not any(OLDER in n for n in turn.notes)


def test_entries_beyond_the_run_records_200_count_as_older_notes():
    chat = Chat()
    chat.user("Los", page=42)
    for _ in range(201):
        chat.segment("turn", "completed", None, [*model_round(1)])
    chat.user("Und?", page=42)

    turn = build_turn_input(chat.events)

    assert turn.notes[0].startswith(OPEN + OLDER)
    assert len(turn.record) == 200


def test_a_segment_that_wrote_300_records_still_gets_its_note_naming_the_first_and_counting_the_rest():
    chat = Chat()
    chat.user("Alle Seiten", page=1)
    chat.segment(
        answer="Erledigt.",
        steps=[
            *model_round(1),
            *(
                step
                for uid in range(1, 301)
                for step in (tool("update_page_metadata", 1), write("update_page_metadata", "pages", uid, 1))
            ),
        ],
    )
    chat.user("was ist hier passiert?")

    (note,) = build_turn_input(chat.events).notes
    assert "Tools run: update_page_metadata (300 calls)." in note
    assert "Records written: pages:1 (complete), pages:2 (complete)" in note
    assert "pages:8 (complete), and 292 more (300 in all)." in note
    assert "pages:9 " not in note
    assert len(note) < 1000


def test_a_record_written_several_times_is_named_once_with_its_count():
    chat = Chat()
    chat.user("Titel", page=42)
    chat.segment(
        answer="Ok.",
        steps=[
            *model_round(1),
            *(
                step
                for _ in range(3)
                for step in (tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1))
            ),
        ],
    )
    chat.user("und?")

    (note,) = build_turn_input(chat.events).notes
    assert "Records written: pages:42 (complete, 3 writes)." in note


def test_a_long_waiting_list_is_shortened_and_the_notes_closing_sentences_stay():
    chat = Chat()
    chat.user("Viel", page=42)
    many_fields = tuple(f"{'f' * 60}{i}" for i in range(40))
    calls = [call(f"tool_{i}", "pages", 42, many_fields) for i in range(40)]
    chat.segment(outcome="awaiting_approval", answer="Darf ich?", waiting=calls)
    chat.user("und?")

    (note,) = build_turn_input(chat.events).notes
    assert "and 36 more (40 in all)" in note  # fields of the one call named
    assert "and 39 more (40 in all)" in note  # calls
    assert note.endswith(
        "Nothing from it was saved in the chat. "
        "The run may still be decided in AI Tasks; such a later decision is not recorded here.]"
    )
    assert len(note) < MAX_BODY


def test_a_record_written_with_different_completeness_is_named_once_with_each_count():
    chat = Chat()
    chat.user("Titel", page=42)
    chat.segment(
        answer="Ok.",
        steps=[
            *model_round(1),
            tool("update_page_metadata", 1),
            write("update_page_metadata", "pages", 42, 1),
            tool("update_page_metadata", 1),
            write("update_page_metadata", "pages", 42, 1, completeness=None),
        ],
    )
    chat.user("und?")

    (note,) = build_turn_input(chat.events).notes
    assert "Records written: pages:42 (2 writes: 1 complete, 1 unconfirmed)." in note
