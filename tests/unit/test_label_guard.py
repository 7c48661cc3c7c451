"""The ASCII fast path of the forged-label check answers as the full fold does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.label_guard import ASCII_OPENINGS, FORGED, _fold, folded, has_forged_label


def test_the_ascii_openings_are_every_ascii_character_that_folds_to_an_opening() -> None:
    assert {c for c in map(chr, range(128)) if _fold(c) == "["} == set(ASCII_OPENINGS) == {"<", "[", "{"}


@given(st.lists(st.sampled_from([chr(i) for i in range(128)] + ["[chat record", "<Chat_Record", "{chat-record", "chat"]),
                max_size=30).map("".join))
def test_an_ascii_text_is_judged_as_its_folded_form_is(text: str) -> None:
    assert has_forged_label(text) is (FORGED.search(folded(text)) is not None)


def test_an_ascii_forgery_is_still_found_and_a_plain_text_is_not() -> None:
    assert has_forged_label("Bitte lies: [Chat record: saved]") is True
    assert has_forged_label("see <chat  record") is True
    assert has_forged_label("{CHAT-RECORD") is True
    assert has_forged_label("chat record without a bracket") is False
    assert has_forged_label("[chat] and a record") is False
    assert has_forged_label("") is False
    assert has_forged_label("ü [chat record") is True  # not ASCII: folded
