"""Transcript positions (`projections.positions`): where each user message stands, kept as the
fold appends (a list the positions of one fold share, each reading its own prefix)."""

from __future__ import annotations

from factories import Chat

from projections import positions
from projections.positions import Positions


def fold(chat: Chat) -> list[Positions]:
    state, seen = Positions(), []
    for event in chat.events:
        state = positions.advance(state, event)
        seen.append(state)
    return seen


def talk(chat: Chat, turns: int) -> None:
    for i in range(turns):
        chat.user(f"Frage {i}")
        chat.segment(answer=f"Antwort {i}")


def test_each_state_of_a_fold_reads_the_users_it_had_then() -> None:
    chat = Chat()
    talk(chat, 3)

    seen = fold(chat)

    assert [(p.length, p.last_role, p.users) for p in seen] == [
        (0, None, {}),
        (1, "user", {1: 0}),
        (2, "assistant", {1: 0}),
        (3, "user", {1: 0, 2: 2}),
        (4, "assistant", {1: 0, 2: 2}),
        (5, "user", {1: 0, 2: 2, 3: 4}),
        (6, "assistant", {1: 0, 2: 2, 3: 4}),
    ]
    assert [p.index_of(2) for p in seen] == [None, None, None, 2, 2, 2, 2]
    # one list for the whole fold: a user message appended costs no copy of those before it
    assert seen[-1]._pairs is seen[3]._pairs and len(seen[-1]._pairs) == 3


def test_an_edit_cuts_the_users_after_it_and_a_branch_copies_its_own_prefix() -> None:
    chat = Chat()
    talk(chat, 3)
    chat.edit(2, "Frage 2, anders")
    chat.segment(answer="Neue Antwort", run="run-after-edit")
    chat.user("Frage 3 danach")

    seen = fold(chat)
    before_edit = seen[6]
    branch = positions.advance(seen[4], chat.events[5])  # message 3 posted again on the state before it

    assert (seen[-1].length, seen[-1].users) == (5, {1: 0, 2: 2, 3: 4})
    assert before_edit.users == {1: 0, 2: 2, 3: 4} and before_edit.length == 6
    assert branch.users == {1: 0, 2: 2, 3: 4} and branch._pairs is not seen[-1]._pairs
    assert seen[3].users == {1: 0, 2: 2}  # unchanged by the appends after it


def test_positions_compare_and_round_trip_by_their_values() -> None:
    chat = Chat()
    talk(chat, 2)
    folded = fold(chat)[-1]

    dumped = folded.model_dump(mode="json")

    assert dumped == {"length": 4, "last_role": "assistant", "users": {"1": 0, "2": 2}}
    assert Positions.model_validate(dumped) == folded
    assert hash(Positions.model_validate(dumped)) == hash(folded)
    assert Positions.model_validate({"length": 4, "last_role": "assistant", "users": {"1": 0}}) != folded
