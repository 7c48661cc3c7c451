"""How the command line shows things with rich: a turn's model input (notes boxed apart), the audit table,
rebuild reports and diffs. Data texts go in as `rich.text.Text`, never markup, and through `visible`, so
no control character reaches the terminal."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from adapters.api import Reproduction, Verdict
from adapters.cli.stdio import FORMAT_CHARACTERS
from projections.audit import AuditRow
from projections.notes import LABEL, note_body, split_notes
from projections.turn import TurnInput
from projections.usage import usage_line

ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green"}
READINGS = ("ran", "failed", "not_permitted", "held", "declined")


_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{FORMAT_CHARACTERS}]")
"""C0 and C1 controls but newline and tab, DEL, the line and paragraph separators and the
format characters (Unicode category Cf), which print as nothing or reorder text."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """Returns `text` with dangerous characters written as Python escapes (ESC as `\\x1b`, `\\u202e`,
    `\\U000e0041`). Escaped: DEL; every C0 and C1 control except newline and tab; U+2028 and U+2029; and
    every format character (category Cf). Those include bidi controls, zero-width characters, the soft
    hyphen U+00AD and the tag characters U+E0000–U+E007F."""
    return _CONTROL.sub(_escape, text)


def visible_line(text: str) -> str:
    """Returns `visible(text)` on one line: newline and tab also written as `\\n`, `\\t`."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def when(at: datetime) -> str:
    """Returns `at` as `2026-10-31 14:05:00 UTC`."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def short_id(segment: str) -> str:
    """Returns a segment id for a table: `3f6c2a9e…/3` for a long run id with a suffix."""
    run, slash, rest = segment.rpartition("/")
    if slash and len(run) > 12:
        return f"{run[:8]}…/{rest}"
    return segment if len(segment) <= 24 else segment[:20] + "…"


def _plural(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# ---------------------------------------------------------------- a turn's model input


def notes_box(notes: Sequence[str]) -> Panel:
    """Returns the box of consecutive notes: one bullet each, the label in the title."""
    body = Table.grid(padding=(0, 1))
    body.add_column(no_wrap=True)
    body.add_column(overflow="fold")
    for note in notes:
        body.add_row("•", Text(visible(note_body(note))))
    return Panel(
        body,
        title=Text(f"chat record · {_plural(len(notes), 'note')}"),
        title_align="left",
        border_style="bold yellow",
        box=box.HEAVY,
    )


CHUNK = 4000
"""Characters of a message's text rendered as one `Text`. rich renders a wrapped `Text` as one
segment holding every line break and splits it line by line, copying the rest each time: a
long text took time quadratic in its lines (112 s for a message of 10 MB). Cut into chunks,
the work is linear; a chunk ends at a line break where the text has one near, so the output
is unchanged for every text below CHUNK and for texts made of lines."""


def text_block(text: str) -> RenderableType:
    """Returns `text` as a `Text`, or for a long text a group of `Text` chunks (see CHUNK)."""
    if len(text) <= CHUNK:
        return Text(text)
    chunks: list[RenderableType] = []
    start = 0
    while len(text) - start > CHUNK:
        end = text.rfind("\n", start, start + CHUNK)
        if end > start:
            chunks.append(Text(text[start:end]))
            start = end + 1
            continue
        end = text.rfind(" ", start + 1, start + CHUNK)
        end = end if end > start else start + CHUNK
        chunks.append(Text(text[start:end]))
        start = end + 1 if text[end : end + 1] == " " else end
    chunks.append(Text(text[start:]))
    return Group(*chunks)


def message_panel(role: str, content: str, notes: Sequence[str], start: int) -> tuple[Panel, int]:
    """Returns one message as a panel titled by its role, its notes boxed; and the next note."""
    pieces, after = split_notes(content, notes, start)
    parts: list[RenderableType] = [
        text_block(visible(value.strip("\n"))) if kind == "text" else notes_box(value) for kind, value in pieces
    ]
    return Panel(
        Group(*parts), title=Text(visible(role)), title_align="left", border_style=ROLE_STYLE.get(role, "white"), box=box.ROUNDED
    ), after


def turn_view(conversation: str, turn: TurnInput, rules: str) -> Group:
    """Returns a turn's model input: a heading, each message sent, the notes boxed inside."""
    heading = Text(f"{visible_line(conversation)} · message {turn.message} · {when(turn.at)} · rules {rules}", style="bold")
    parts: list[RenderableType] = [Rule(heading, align="left")]
    index = 0
    for message in turn.model_messages():
        panel, index = message_panel(message["role"], message["content"], turn.notes, index)
        parts.append(panel)
    sent = f"{_plural(len(turn.model_messages()), 'message')} sent, "
    if turn.notes:
        sent += f'{_plural(len(turn.notes), "note")} among them; each is sent as "[{LABEL}: …]".'
    else:
        sent += "no notes."
    parts.append(Text(sent, style="dim"))
    parts.append(Text())
    return Group(*parts)


def comparison(turns: Iterable[tuple[str, TurnInput]]) -> Table:
    """Returns a table comparing one turn under several rule sets: messages and notes sent, the records the
    notes name, the view context's pages."""
    table = Table(title=Text("The same turn under each rule set"), box=box.SIMPLE_HEAD)
    for column in ("rule set", "messages", "notes", "records named", "page now/last"):
        table.add_column(column, no_wrap=True)
    for rules, turn in turns:
        written = {w.record for e in turn.record for w in e.written} | {o.record for o in turn.card_outcomes if o.record}
        named = sorted(r for r in written if any(r in n for n in turn.notes))
        view = turn.view_context
        table.add_row(
            Text(rules),
            str(len(turn.model_messages())),
            str(len(turn.notes)),
            Text(visible("\n".join(named) or "none")),
            f"{view.page_id or 'none'} / {view.last_page_id or 'none'}",
        )
    return table


# ---------------------------------------------------------------- audit


def _calls(calls: list[dict[str, Any]]) -> str:
    parts = []
    for reading in READINGS:
        named = [f"{c['tool']}" + (f" ×{c['count']}" if c["count"] != 1 else "") for c in calls if c["reading"] == reading]
        if named:
            parts.append(f"{reading.replace('_', ' ')}: {', '.join(named)}")
    return "; ".join(parts) or "no tool calls"


def _target(record: str | None, fields: list[str]) -> str:
    return (record or "a new record") + (f" ({', '.join(fields)})" if fields else "")


def row_facts(row: AuditRow) -> str:
    """Returns the facts of an audit row as short lines."""
    f = row.facts
    if row.kind == "started":
        return f"{f['conversation_kind']} conversation {f['conversation']}, owner {f['owner']}"
    if row.kind == "skill":
        return f"skill {f['skill']} loaded"
    if row.kind == "message":
        page = f"page {f['page']}" if f["page"] else "no page"
        return f"user message {f['message']}, {page}" + (f", skill {f['skill']}" if f["skill"] else "")
    if row.kind == "segment":
        after = f", after {f['follows']}" if f["follows"] else ""
        lines = [f"{short_id(f['segment'])} ({f['trigger']}{after}) → {f['outcome']}", _calls(f["calls"])]
        written = [f"{w['record']} ({w['completeness']}{', hook failed' if w['hook_failed'] else ''})" for w in f["written"]]
        lines.append("written: " + (", ".join(written) or "nothing"))
        if f["waiting"]:
            lines.append(
                "waiting: "
                + "; ".join(
                    f"{w['tool']} on {_target(w['record'], w['fields'])}" if w["record"] else w["tool"] for w in f["waiting"]
                )
            )
        if f["flagged"]:
            lines.append("answer flagged nothingSaved")
        lines.append(usage_line(f["usage"]))
        return "\n".join(lines)
    if row.kind == "decision":
        return f"card of {short_id(f['segment'])} {'approved' if f['approved'] else 'declined'}: {f['answer']}"
    if row.kind == "card_outcome":
        card = f"card of {short_id(f['card'])}" if f["card"] else "legacy card"
        return f"{card}: {f['outcome']}, {f['tool']} on {_target(f['record'], f['fields'])}"
    if row.kind == "answer":
        return f"question of {short_id(f['segment'])} answered (user message {f['message']})"
    if row.kind == "undecided":
        elsewhere = "; may still be decided in AI Tasks" if f["decidable_elsewhere"] else ""
        return f"{f['waiting']} of {short_id(f['segment'])} left undecided: {f['reason'].replace('_', ' ')}{elsewhere}"
    if row.kind == "retry":
        return f"turn of user message {f['message']} run again"
    if row.kind == "tour_ended":
        return "tour ended, skill cleared"
    if row.kind == "erased":
        return "texts erased: data key deleted"
    if row.kind == "edit":
        return f"user message {f['message']} edited"
    if row.kind == "cut":
        return (
            f"cut after message {f['after_message']}: messages {', '.join(map(str, f['messages'])) or 'none'}; "
            f"segments {', '.join(map(short_id, f['segments'])) or 'none'}; "
            f"decisions {', '.join(map(short_id, f['cards'])) or 'none'}"
        )
    if row.kind in ("transcript_replaced", "legacy_row"):
        return ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in f.items())
    return json.dumps(f, ensure_ascii=False)


ERASURE_UNFINISHED = (
    "texts erased: recorded, but the data key is not deleted yet (the erase stopped early): run chatrecord erase again"
)
"""An erasure row's facts while its data key still exists (`Audit.erasure_unfinished`)."""


def audit_table(conversation: str, rows: Sequence[AuditRow], rules: str, erasure_unfinished: bool = False) -> Table:
    """Returns the audit as a table: version (`v`; a card outcome shares its decision's), time, kind, facts.
    Cut rows are dimmed. With `erasure_unfinished`, an erasure row says its data key is not deleted yet."""
    segments = sum(r.kind == "segment" for r in rows)
    table = Table(
        title=Text(
            f"Audit of {visible_line(conversation)} · rule set {rules} · {_plural(len(rows), 'row')}, {_plural(segments, 'segment')}"
        ),
        box=box.SIMPLE_HEAD,
        show_lines=False,
        caption=Text("v: the event's version in the log. Segment ids are shortened; audit --json gives them in full."),
    )
    table.add_column("v", justify="right")
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("facts", overflow="fold")
    for row in rows:
        style = "dim strike" if row.cut else None
        kind = row.kind.replace("_", " ") + (" (cut)" if row.cut else "")
        table.add_row(
            str(row.version),
            row.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            Text(kind),
            Text(ERASURE_UNFINISHED if erasure_unfinished and row.kind == "erased" else visible(row_facts(row))),
            style=style,
        )
    return table


# ---------------------------------------------------------------- rebuild


def chain_line(verdict: Verdict | None) -> str:
    """Returns the line `audit` prints about the conversation's hash chain."""
    if verdict is None:
        return "chain: not kept by this store"
    if verdict.ok:
        events = f"{verdict.events} event{'s' if verdict.events != 1 else ''}"
        return f"chain: verified, {events}, head {verdict.hash.hex()[:16] if verdict.hash else '-'}…"
    return f"chain: BROKEN at version {verdict.version} ({verdict.problem}): {verdict.detail}"


def entry_summary(entry: Any) -> str:
    """Returns a run record entry (its `to_json()` dict; None when absent) in one line."""
    if entry is None:
        return "(no entry)"
    tools = (
        ", ".join(
            f"{t['name']} {t['calls']}" + (f" ({t['failed']} failed)" if t["failed"] else "") for t in entry.get("tools", [])
        )
        or "none"
    )
    written = ", ".join(f"{w['record']} ({w['completeness']})" for w in entry.get("written", [])) or "nothing"
    text = f"tools: {tools}; written: {written}"
    if entry.get("decision"):
        text += f"; decision: {entry['decision']}"
    if entry.get("undecided"):
        text += f"; undecided: {entry['undecided']}"
    return text


def diff_view(diff: Any) -> Group:
    """Returns one conversation's changes: records before → after, notes removed and added."""
    parts: list[RenderableType] = [
        Text(
            f"{visible(diff.conversation)}: {_plural(len(diff.records_changed), 'record entry', 'record entries')} change, "
            f"{_plural(len(diff.notes_removed), 'note')} removed, {_plural(len(diff.notes_added), 'note')} added",
            style="bold",
        )
    ]
    if diff.records_changed:
        table = Table(box=box.SIMPLE_HEAD)
        for column in ("segment", "before", "after"):
            table.add_column(column, overflow="fold")
        for segment, before, after in diff.records_changed:
            table.add_row(*(Text(visible(text)) for text in (short_id(segment), entry_summary(before), entry_summary(after))))
        parts.append(table)
    notes = Table.grid(padding=(0, 1))
    notes.add_column(no_wrap=True)
    notes.add_column(overflow="fold")
    for sign, style, changed in (("-", "red", diff.notes_removed), ("+", "green", diff.notes_added)):
        for note in changed:
            notes.add_row(Text(sign, style=style), Text(visible(note_body(note)), style=style))
    parts.append(notes)
    return Group(*parts)


def broken_chain_warning(verdict: Verdict | None, shows: str) -> str | None:
    """Returns the warning that an output (`shows`: what it holds) came from a log whose chain does not
    verify. None where it verifies, there is no chain, or the conversation is `unchained`."""
    if verdict is None or verdict.ok or verdict.problem == "unchained":
        return None
    detail = f": {verdict.detail}" if verdict.detail else ""
    return (
        f"warning: the hash chain of conversation {verdict.conversation} does not verify, broken at version "
        f"{verdict.version} ({verdict.problem}){detail}; {shows} (chatrecord verify names the break)"
    )


def stream_line(done: Reproduction) -> str:
    """Returns one line of facts about a kept reproduction (no answer text)."""
    return (
        f"{done.started_at}  {done.id}  message {done.message} at log version {done.log_version} under {done.rules}, "
        f"model {done.model}: {len(done.answers)} answers, {done.denials} deny the saves, {done.naming_writes} name the writes"
        + (f", {done.cut_off} cut off at the token limit" if done.cut_off else "")
        + ("" if done.chain_broken_at is None else f"; its chain is broken at {done.chain_broken_at}")
    )
