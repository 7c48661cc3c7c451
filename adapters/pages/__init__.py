"""The timeline page: one conversation as a timeline, what the model was sent at any turn under
any rule set, the chain's state; and the list of conversations. Rendered server-side with
Jinja2 from the service layer's results (`adapters.service.timeline`); the templates only show.

Every text from the chat goes through Jinja2's autoescaping and the `shown` filter, which also
writes the characters that hide or reorder text (bidi controls, zero-width characters, C0/C1
controls) as visible escapes; nothing from the data is marked safe. The page carries its CSS
inline and needs no script: the turn and rule set switches are links (query parameters on the
server, fragment targets in the exported file, shown with CSS `:target`). The exported file
holds a Content-Security-Policy that allows no request at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from adapters.api import (
    RAW_PAGE,
    STATUSES,
    Compared,
    OverviewPoint,
    RawPage,
    TimelinePage,
    TurnDiff,
    TurnView,
    Verdict,
    newest_turns_under,
    page_start,
    turn_view,
)
from adapters.pages.overview_layout import overview_data, when
from projections.notes import note_body, split_notes
from projections.overview import Overview
from projections.rules import RULE_SET_IDS
from projections.turn_notes import TurnNotes
from projections.usage import usage_line

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
STATIC_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""The exported file's policy: inline CSS only, no script, no request of any kind."""
INPUTS = 20
"""Turns whose model input the exported file holds, newest first (`timeline --inputs`)."""
SERVER_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-src 'self'; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'self'"
)
"""The served pages' policy (sent as a header): no script, requests to the server only."""


def shown(text: object) -> Markup:
    """Returns `text` escaped for HTML, each invisible or reordering character written as a
    visible escape (`\\u202e`) in a `<span class="ctl">`."""
    escaped = str(escape(str(text)))
    return Markup(_CONTROL.sub(lambda m: f'<span class="ctl">\\u{ord(m.group()):04x}</span>', escaped))


def short_id(segment: str) -> str:
    """Returns a segment id shortened for a row: `3f6c2a9e…/3`."""
    run, slash, rest = segment.rpartition("/")
    if slash and len(run) > 12:
        return f"{run[:8]}…/{rest}"
    return segment if len(segment) <= 28 else segment[:24] + "…"


def model_input(view: TurnView) -> list[dict[str, Any]]:
    """Returns the messages of a turn view for the template: role and pieces (text, or notes
    with whether each was added under this rule set)."""
    return _pieces(view, view.turn.model_messages(), 0)


def _pieces(view: TurnView, messages: Sequence[dict[str, str]], start: int) -> list[dict[str, Any]]:
    """Returns `messages` (of `view`'s turn) cut into pieces, the notes found from `start` on."""
    shown, index = [], start
    for message in messages:
        parts, index = split_notes(message["content"], view.turn.notes, index)
        shown.append(
            {
                "role": message["role"],
                "parts": [
                    (kind, value if kind == "text" else [(note_body(n), n in view.added) for n in value]) for kind, value in parts
                ],
            }
        )
    return shown


def input_parts(view: TurnView, whole: bool) -> dict[str, Any]:
    """Returns a turn view's messages for its panel: `first` (the system message), `earlier`
    (the messages between it and the last `LAST_MESSAGES`: their pieces where the panel holds
    them, `whole`, else none) with their `count`, and `last`. Only the messages shown are cut
    into pieces, so a panel without its earlier messages costs what it shows."""
    turn = view.turn
    cut = max(len(turn.messages) + 1 - LAST_MESSAGES, 1)  # the system message, then the transcript
    if whole or cut == 1:
        pieces = _pieces(view, turn.model_messages(), 0)
        return {"first": pieces[0], "earlier": pieces[1:cut], "count": cut - 1, "last": pieces[cut:]}
    notes, tail = turn.notes, [{"role": m.role, "content": m.text} for m in turn.messages[cut - 1 :]]
    joined = "\x00".join(m["content"] for m in tail)
    start, end = len(notes), len(joined)
    while start > 0:  # the notes the last messages hold: a suffix of the turn's, found backwards
        found = joined.rfind(notes[start - 1], 0, end)
        if found < 0:
            break
        start, end = start - 1, found
    system = [{"role": "system", "content": turn.system}]
    return {"first": _pieces(view, system, 0)[0], "earlier": [], "count": cut - 1, "last": _pieces(view, tail, start)}


def id_segment(conversation: str) -> str:
    """Returns a conversation id as one path segment: each character but `A-Za-z0-9_.~-` percent-encoded,
    `/` too (the server tells the id from its sub-pages by it: `adapters.http.conversation_paths`), and an
    id of only dots (`.`, `..`) with its dots encoded, which a client would otherwise resolve away."""
    segment = quote(conversation, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def conversation_path(conversation: str) -> str:
    """Returns the path of a conversation's page."""
    return "/ui/conversations/" + id_segment(conversation)


@dataclass(frozen=True)
class Links:
    """How the page links: to the server's routes (`static` False) or to fragments of one file."""

    conversation: str
    static: bool
    rules: str

    def base(self) -> str:
        return conversation_path(self.conversation)

    def turn(self, message: int, rules: str | None = None) -> str:
        rules = rules or self.rules
        if self.static:
            return f"#turn-{message}-{rules}"
        return f"{self.base()}?{urlencode({'turn': message, 'rules': rules})}#model-input"

    def older(self, before: int) -> str:
        return f"{self.base()}?{urlencode({'before': before})}"

    def newest(self) -> str:
        return self.base()

    def overview(self) -> str:
        return self.base() + "/overview.svg"

    def full(self) -> str:  # the page, its chain's verdict recomputing every hash
        return self.base() + "?full=1"

    def raw(self, version: int) -> str:  # the raw event view's page that holds `version`, at it
        return f"{self.base()}/events?{urlencode({'from': page_start(version)})}#raw-{version}"

    def row(self, version: int) -> str:  # a row of the timeline: its page, at it (the jump)
        return f"#e-{version}" if self.static else f"{self.base()}?{urlencode({'jump': f'e{version}'})}"

    def file(self, name: str) -> str:  # a download: audit.json, export.jsonl, trace.json
        return f"{self.base()}/{name}"

    def verify(self) -> str:  # the chain's verdict alone, every hash recomputed
        return self.base() + "/chain?full=1"

    def rules_diff(self, other: str | None = None, start: int = 0) -> str:
        asked = {"other": other} if other else {}
        return f"{self.base()}/rules?{urlencode({**asked, 'start': start})}"

    def compare(self) -> str:
        return self.base() + "/compare"


LAST_MESSAGES = 8
"""Messages of a model input shown open (the system message and the last ones); the earlier
ones are behind a `<details>` (the latest turn's) or named, with the command that shows them."""


@dataclass(frozen=True)
class FilePages:
    """Where a page of the timeline file links: `number` (1: the newest turns), the file of the
    newer page and of the older one (relative names; None: none written), and `more`, the
    command that writes older pages where this is the last one written and older turns exist."""

    number: int = 1
    newer: str | None = None
    older: str | None = None
    more: str | None = None


@cache
def environment() -> Environment:
    """Returns the Jinja2 environment of the templates (package data), autoescaping on."""
    env = Environment(
        loader=PackageLoader("adapters.pages", "templates"),
        autoescape=select_autoescape(["html", "svg", "xml"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(shown=shown, when=when, short_id=short_id, note_body=note_body, usage_line=usage_line)
    env.globals.update(RULE_SET_IDS=RULE_SET_IDS, model_input=model_input, input_parts=input_parts)
    return env


@cache
def stylesheet() -> str:
    """Returns the page's CSS (package data), inlined into every page."""
    return resources.files("adapters.pages").joinpath("templates", "page.css").read_text(encoding="utf-8")


def overview_svg(points: Sequence[OverviewPoint] | Overview, width: int = 960, link: str | None = None) -> str:
    """Returns the SVG picture of a conversation: one column per slice of its events (x: the
    order of events, dated where the day changes), lanes for messages, segments (by outcome),
    decisions and trouble (cards left undecided, edits, cuts). `points` are the overview's
    points, or its read model (`projections.overview.Overview`, see `overview_data`). With
    `link`, each mark links to `link` followed by its event's version (the first of its column)."""
    return environment().get_template("overview.svg").render(**overview_data(points, width), link=link)


def overview_linked(points: Sequence[OverviewPoint] | Overview) -> str:
    """Returns the overview picture for the served page, inline: each mark links to the
    timeline's page that shows its event, at it (`?jump=eV`), and its title shows on hover."""
    return overview_svg(points, link="?jump=e")


FILE_OVERVIEW_LINK = "#e-"
"""Where the file's overview marks link: the row of their event (on the file's first page)."""


def conversation_page(
    page: TimelinePage,
    *,
    static: bool,
    chain: Verdict | None,
    overview: str | None,
    views: dict[tuple[int, str], TurnView] | None = None,
    file_pages: FilePages | None = None,
    selected: TurnView | None = None,
    next_call: TurnNotes | None = None,
    latest_message: int | None = None,
    generated: str | None = None,
    with_input: set[int] | None = None,
    reproduced: Sequence[str] = (),
) -> str:
    """Returns the HTML of a conversation's timeline page.

    `static`: one self-contained file (every turn view in `views`, keyed by (message, rule
    set), shown when its fragment is targeted; `file_pages`: the links to the files of the
    newer and older pages); else the
    server's page (`selected`: the turn view asked for; `next_call`: the notes of the next model
    call, shown on open, with a link to the latest turn, user message `latest_message`). `chain`: the verdict, shown
    whole (what was checked, when, by what), None for a store without a chain. `overview`: inline SVG
    markup, or None to load it from the server. `with_input`: in a file, the user messages whose
    turn input it holds (the others link to nothing). `reproduced`: a line per run of `chatrecord
    reproduce` on it (its count in the spec's form), shown under the summary."""
    links = Links(page.conversation, static, page.rules)
    return (
        environment()
        .get_template("conversation.html")
        .render(
            page=page,
            static=static,
            chain=chain,
            overview=Markup(overview) if overview is not None else None,
            views=views or {},
            file_pages=file_pages or FilePages(),
            selected=selected,
            next_call=next_call,
            latest_message=latest_message,
            links=links,
            with_input=with_input,
            reproduced=reproduced,
            css=Markup(stylesheet()),
            csp=STATIC_CSP if static else None,
            generated=generated,
            latest_key=next(iter(views or {}), None),
        )
    )


def chain_page(chain: Verdict | None) -> str:
    """Returns the small HTML document of a chain's verdict alone (`…/chain`)."""
    return environment().get_template("chain.html").render(chain=chain, css=Markup(stylesheet()))


LIST_STATUSES = STATUSES
"""The statuses the list's form offers as checkboxes (`chatrecord list --status`)."""


def list_page(rows: Sequence[dict[str, Any]], asked: dict[str, Any], next_after: str | None, message: str | None = None) -> str:
    """Returns the HTML of the conversation list: `rows` of {"conversation", …}, the filters
    `asked` ({"q", "owner", "since", "until", "status": [...]}, as the form sent them), the link
    to the next page (`next_after`, with the same filters), and a `message` (no match)."""
    kept = [(k, v) for k, v in asked.items() if k != "status" and v] + [("status", s) for s in asked.get("status", [])]
    return (
        environment()
        .get_template("list.html")
        .render(
            rows=rows,
            asked=asked,
            statuses=LIST_STATUSES,
            next_query=urlencode([*kept, ("after", next_after)]) if next_after else "",
            next_after=next_after,
            message=message,
            css=Markup(stylesheet()),
            quote=id_segment,
        )
    )


def login_page(next_path: str, failed: bool = False, wait: int = 0, signed_out: bool = False) -> str:
    """Returns the sign-in form (after a wrong token, a `wait` in seconds, or a sign-out, it says so)."""
    said = {"failed": failed, "wait": wait, "signed_out": signed_out}
    return environment().get_template("login.html").render(next_path=next_path, **said, css=Markup(stylesheet()))


def file_overview_svg(points: Sequence[OverviewPoint] | Overview) -> str:
    """`overview_svg` with each mark linked to its row on the file's page (`FILE_OVERVIEW_LINK`)."""
    return overview_svg(points, link=FILE_OVERVIEW_LINK)


def export_pages(
    chatrecord: Any,
    conversation: str,
    names: Sequence[str],
    generated: str | None = None,
    inputs: int = INPUTS,
    chain: Any = None,
    more: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """Returns the conversation's timeline as self-contained HTML files, one per page of
    `PAGE_TURNS_SHOWN` turns, newest first: as many pages as `names` holds (the files' names,
    newest first, each page linking to its neighbours by them; `more`: the command the last
    page names when older turns exist). The first page also holds the overview, the chain's
    verdict, and what the model was sent at the newest `inputs` turns under every rule set
    (each shown when its link is followed; no script): the latest turn under the live rule set
    whole (its earlier messages behind a `<details>`), the others' last messages only, so a file
    costs what it shows, not the square of the conversation. `chatrecord` is the service layer
    (`adapters.api.Chatrecord`); `chain` its verdict of the conversation's chain where the
    caller has it, one that recomputed every hash (asked for here when None: an auditor's copy is
    made once); `progress(what)` is told each step. Raises UnknownConversation."""
    say = progress or (lambda what: None)
    say("reading the turns")
    wanted = len(names) * PAGE_TURNS_SHOWN
    read = chatrecord.timeline(conversation, turns=wanted)
    pages = [read.turns[i : i + PAGE_TURNS_SHOWN] for i in range(0, len(read.turns), PAGE_TURNS_SHOWN)] or [()]
    active = read.rules
    say("what the model was sent")
    events = chatrecord.events(conversation) if inputs > 0 else []
    replays = newest_turns_under(events, RULE_SET_IDS, inputs)
    base = {t.message: t for t in replays[active]}
    views: dict[tuple[int, str], TurnView] = {}
    for rules, done in replays.items():
        for t in done:
            views[(t.message, rules)] = turn_view(t, rules, base[t.message], active)
    say("the hash chain")
    chain = chain if chain is not None else chatrecord.chain(conversation, full=True, by="chatrecord timeline")
    say("the overview")
    svg = chatrecord.overview_drawn(conversation, file_overview_svg)
    latest = replays[active][-1] if replays[active] else None
    if latest is not None:  # the latest turn under the live rules first: shown when no other is chosen
        views = {(latest.message, active): views.pop((latest.message, active)), **views}
    older_exists = read.before is not None
    files = []
    for index, turns in enumerate(pages):
        say(f"writing page {index + 1} of {len(pages)}")
        last = index == len(pages) - 1
        links = FilePages(
            index + 1,
            names[index - 1] if index else None,
            None if last else names[index + 1],
            more if last and older_exists else None,
        )
        page = TimelinePage(read.conversation, read.rules, read.version, tuple(turns), None)
        files.append(
            conversation_page(
                page,
                static=True,
                chain=chain,
                overview=svg,
                views=views if index == 0 else {},
                file_pages=links,
                generated=generated,
                with_input={m for m, _ in views} if index == 0 else set(),
            )
        )
    return files


def export_page(chatrecord: Any, conversation: str, generated: str | None = None, inputs: int = INPUTS, chain: Any = None) -> str:
    """Returns the first page of the conversation's timeline file (`export_pages`)."""
    return export_pages(chatrecord, conversation, ["page.html"], generated, inputs, chain)[0]


PAGE_TURNS_SHOWN = 20
"""Turns shown open in the exported file; older ones are folded in pages of this many."""


def error_page(title: str, detail: str) -> str:
    """Returns a page saying what went wrong (an unknown conversation, a turn that does not exist)."""
    return environment().get_template("error.html").render(title=title, detail=detail, css=Markup(stylesheet()))


def raw_page(conversation: str, page: RawPage) -> str:
    """Returns the raw event view of a page of a conversation's events (`RawPage`): each event
    as stored, its topic, its hash and the hash before it, with links to the pages around it."""
    links = Links(conversation, False, "")
    last = page.events[-1].version if page.events else page.first
    return (
        environment()
        .get_template("raw.html")
        .render(
            conversation=conversation,
            page=page,
            links=links,
            older=page.first - RAW_PAGE if page.first > 1 else None,
            newer=page.first + RAW_PAGE if last < page.last else None,
            newest=page_start(page.last),
            css=Markup(stylesheet()),
        )
    )


def rules_diff_page(conversation: str, base: str, other: str, turns: Sequence[TurnDiff], more: bool, start: int) -> str:
    """Returns the rule-set diff of a conversation: `turns` (a page of `PAGE_TURNS_SHOWN` from
    the `start`th; `more`: later turns exist) read under `other` beside `base`, each with the
    notes added and dropped and the page line where it differs."""
    links = Links(conversation, False, base)
    return (
        environment()
        .get_template("rules_diff.html")
        .render(
            conversation=conversation,
            base=base,
            other=other,
            turns=turns,
            start=start,
            links=links,
            older=links.rules_diff(other, start + PAGE_TURNS_SHOWN) if more else None,
            newer=links.rules_diff(other, max(start - PAGE_TURNS_SHOWN, 0)) if start > 0 else None,
            css=Markup(stylesheet()),
        )
    )


COMPARED_MESSAGES = LAST_MESSAGES
"""Appended messages a compare shows whole (the last ones); the others are counted."""


def compare_page(conversation: str, rules: str, compared: Compared) -> str:
    """Returns the compare of two turns: what changed from the first to the second."""
    changes = compared.changes
    appended = changes["appended"]
    return (
        environment()
        .get_template("compare.html")
        .render(
            conversation=conversation,
            rules=rules,
            c=compared,
            changes=changes,
            shown_messages=appended[-COMPARED_MESSAGES:],
            hidden_messages=max(len(appended) - COMPARED_MESSAGES, 0),
            links=Links(conversation, False, rules),
            css=Markup(stylesheet()),
        )
    )
