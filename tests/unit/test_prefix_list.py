"""`projections.prefix_list`: the shared list the folds append to, each state reading its prefix."""

from __future__ import annotations

from projections.prefix_list import extended, taken


def test_a_list_read_whole_is_extended_in_place_and_any_other_copied() -> None:
    items = ["a", "b"]
    default: list[str] = []

    same = extended(items, 2, ("c",))  # the state read all of it: no copy
    branch = extended(items, 2, ("x",))  # an older state's view (it reads 2 of 3): its own copy
    fresh = extended(default, 0, ("a",))  # a shared default's empty list is never extended

    assert same is items and items == ["a", "b", "c"]
    assert branch == ["a", "b", "x"] and branch is not items
    assert fresh == ["a"] and default == []


def test_a_state_that_reads_a_shorter_prefix_than_the_list_holds_copies_it() -> None:
    items = ["a"]
    first = extended(items, 1, ("b",))  # in place: the list is now ["a", "b"]
    older = extended(first, 1, ("z",))  # a state that still reads ["a"]: its own list

    assert first is items and items == ["a", "b"]
    assert older == ["a", "z"] and older is not items


def test_taken_splits_a_key_off_a_dict_and_leaves_anything_else() -> None:
    data = {"kind": "chat", "messages": [1]}

    rest, given = taken(data, "messages")

    assert (rest, given) == ({"kind": "chat"}, [1]) and data == {"kind": "chat", "messages": [1]}
    assert taken({"kind": "chat"}, "messages") == ({"kind": "chat"}, None)
    assert taken("not a dict", "messages") == ("not a dict", None)
