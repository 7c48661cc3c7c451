"""The CLI's headings (`adapters.cli.render`): a conversation id the user typed is shown on one
line, its control characters escaped (a fresh user's `chatrecord audit $'a\\nb'` printed the
newline in the audit's title)."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from adapters.cli.render import audit_table, visible_line


def test_a_newline_or_tab_in_an_id_stays_on_the_headings_line() -> None:
    title = audit_table("a\nb\tc\x1b[2J", [], "2026-11-02").title
    out = StringIO()
    Console(file=out, width=200, color_system=None).print(title)

    assert visible_line("a\nb\tc\x1b[2J\u202e") == "a\\nb\\tc\\x1b[2J\\u202e"
    assert out.getvalue() == "Audit of a\\nb\\tc\\x1b[2J · rule set 2026-11-02 · 0 rows, 0 segments\n"
