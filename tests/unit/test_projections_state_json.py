"""Every read-model state is JSON-serialisable: the read models store it."""

from __future__ import annotations

import json

import pytest
from factories import Chat, call, model_round, seo_tour

from projections import (
    activity,
    card_outcomes,
    run_record,
    transcript,
    turn,
    view_context,
)
from projections.rules import get_rule_set


def story() -> Chat:
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])
    chat.user("und?", page=0)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.user("egal", page=0)
    return chat


@pytest.mark.parametrize("module", [activity, card_outcomes, run_record, transcript, view_context, turn])
def test_a_read_model_state_survives_a_json_round_trip(module):
    state = module.initial()
    for event in story().events:
        state = module.apply(state, event, get_rule_set("2026-11-02"))

    stored = json.loads(json.dumps(state.model_dump(mode="json")))

    assert type(state).model_validate(stored) == state
