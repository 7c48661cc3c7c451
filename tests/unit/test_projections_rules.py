"""Rule sets: their ids, the default, and an unknown id."""

from __future__ import annotations

import pytest

from domain.errors import ChatrecordError
from projections.rules import (
    DEFAULT_RULE_SET,
    RULE_SET_IDS,
    UnknownRuleSet,
    get_rule_set,
)


def test_the_three_rule_sets_are_known_by_their_ids():
    assert RULE_SET_IDS == ("transcript-only", "2026-11-01", "2026-11-02")
    assert [get_rule_set(i).id for i in RULE_SET_IDS] == list(RULE_SET_IDS)


def test_the_default_rule_set_is_the_spec_with_its_amendment():
    rules = get_rule_set(DEFAULT_RULE_SET)

    assert (rules.id, rules.notes, rules.refused_calls, rules.keeps_last_page) == ("2026-11-02", True, True, True)


def test_transcript_only_sends_no_notes_and_reads_no_refusals():
    rules = get_rule_set("transcript-only")

    assert (rules.notes, rules.refused_calls, rules.keeps_last_page) == (False, False, False)


def test_question_and_display_only_tools_have_their_defaults_and_can_be_configured():
    rules = get_rule_set("2026-11-02")
    wider = rules.model_copy(update={"question_tools": frozenset({"ask_choice", "ask_user"})})

    assert rules.question_tools == {"ask_choice"}
    assert rules.display_tools == {"chat_set_progress", "chat_highlight_element"}
    assert wider.question_tools == {"ask_choice", "ask_user"}


def test_an_unknown_rule_set_is_a_chatrecord_error_naming_the_known_ones():
    with pytest.raises(UnknownRuleSet, match="2026-11-02") as raised:
        get_rule_set("2026-12-01")

    assert isinstance(raised.value, ChatrecordError)
