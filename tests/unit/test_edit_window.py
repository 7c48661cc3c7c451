"""`EditWindow`: what an edit's fold reads, followed write by write, answered only from a window
it holds whole, and bounded."""

from __future__ import annotations

from adapters.views.edit_window import EditWindow
from projections.summary_rows import Summary
from projections.transcript import Message


def user(number: int, text: str = "t") -> Message:
    return Message(role="user", text=text, number=number)


def test_from_a_conversations_start_it_answers_an_edits_rows() -> None:
    w = EditWindow.start(None)
    w.put_message(0, user(1))
    w.put_page(1, 42)
    w.put_message(1, Message(role="assistant", text="a"))
    w.put_entry(3, "s1")
    w.put_outcome((4, 0), "s1", 2)
    w.put_message(2, user(2))
    w.put_page(2, 0)
    w.put_entry(6, "s2")
    w.drop_entries([6])
    w.trim()
    assert w.user_index(1) == 0 and w.user_index(2) == 2 and w.user_index(9) is None
    assert w.users[0].text == "" and w.users[0].number == 1  # kept without its text
    assert w.entry_seq("s1", (3,)) == (True, 3)
    assert w.entry_seq("s2", (3,)) == (True, None)  # deleted
    assert w.entry_seq("old", (3,)) == (True, None)  # every kept entry is known: none
    assert w.cut_count({"s1"}, 1) == 1 and w.cut_count({"s2"}, 1) == 0
    assert w.cut_count({"never"}, 1) is None  # a card it does not know returned: not known
    assert w.pages_at(1) == (42, 42) and w.pages_at(2) == (0, 42)


def test_a_summary_read_from_the_database_leaves_the_older_rows_unknown() -> None:
    summary = Summary(version=10, length=5, seqs=(4, 8), outcomes=3)
    w = EditWindow.start(summary)
    w.put_message(5, user(7))
    w.put_entry(11, "s")
    assert w.user_index(7) == 5 and w.user_index(3) is None
    assert w.entry_seq("s", summary.seqs) == (True, 11)
    assert w.entry_seq("older", summary.seqs) == (False, None)  # kept entries 4 and 8: whose, not known
    assert w.cut_count({"s"}, 6) is None  # the outcomes of no card before it: not known
    assert w.pages_at(7) is None
    w.cut_outcomes({"s"}, 6)  # after a cut the database answered, what it leaves is known
    w.cut_pages(6, 42, 42)
    assert w.cut_count({"s"}, 6) == 0 and w.cut_count({"s"}, 5) is None
    assert w.pages_at(6) == (42, 42) and w.pages_at(9) == (42, 42) and w.pages_at(5) is None


def test_each_part_keeps_at_most_its_limit_and_says_where_it_begins() -> None:
    w = EditWindow.start(None)
    n = EditWindow.LIMIT + 8
    for i in range(n):
        w.put_message(i, user(i + 1))
        w.put_entry(100 + i, f"s{i}")
        w.put_outcome((100 + i, 0), None, i)
        w.put_page(i + 1, i % 3)
    w.trim()
    assert len(w.users) == len(w.born) == len(w.outcomes) == len(w.pages) == EditWindow.LIMIT
    assert w.users_from == 8 and w.user_index(1) is None and w.user_index(9) == 8
    assert w.since == 108 and w.entry_seq("s0", tuple(range(100, 100 + n))) == (False, None)
    assert w.loose_below == 8  # the outcomes of no card that left the window lie before 8
    assert w.cut_count(set(), 8) == EditWindow.LIMIT and w.cut_count(set(), 7) is None
    assert w.pages_from == 9 and w.below == (7 % 3, 7 % 3 or 6 % 3)
    assert w.pages_at(8) == w.below and w.pages_at(7) is None


def test_an_edits_message_put_before_its_cut_is_known_again_and_a_copy_follows_its_own_writes() -> None:
    w = EditWindow.start(Summary(version=3, length=4))
    w.cut_messages(2)  # an edit of the message at 1, cut by the database's answer
    w.put_message(1, user(2, "neu"))
    assert w.users_from == 1 and w.user_index(2) == 1
    c = w.copy()
    c.put_message(2, user(3))
    assert c.user_index(3) == 2 and w.user_index(3) is None
