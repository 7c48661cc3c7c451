"""A Python client generated from docs/openapi.json (`openapi-python-client`) drives the demo
tour against a live `chatrecord serve`: every line recorded, the turn read with its notes, a
stale If-Match answered 412, an unknown conversation 404, the audit, activity list, replay and
the store's list read, all as the client's typed objects (issue 23, item 3)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from types import ModuleType

import pytest

from tests.e2e.conftest import ROOT
from tests.http.conftest import TOKEN, Server, server  # noqa: F401 - the fixture, per backend

OPENAPI = ROOT / "docs" / "openapi.json"
DEMO = ROOT / "adapters" / "data" / "demo_seo_tour.jsonl"


@pytest.fixture(scope="module")
def client_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The package `openapi-python-client generate` makes of the document, imported."""
    out = tmp_path_factory.mktemp("client")
    package = out / "chatrecord_client"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(OPENAPI),
            "--output-path",
            str(package),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # its one warning: the NDJSON body of POST /v1/lines, which the generator does not model
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("chatrecord_client")
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n.split(".")[0] == "chatrecord_client"]:
            del sys.modules[name]


def camel(kind: str) -> str:
    return "".join(part.title() for part in kind.split("_")) + "Line"


def test_the_generated_client_drives_the_demo_tour(client_package: ModuleType, server: Server) -> None:  # noqa: F811
    api = importlib.import_module("chatrecord_client.api.default")
    post = importlib.import_module(f"{api.__name__}.post_lines_v1_lines_post")
    turn = importlib.import_module(f"{api.__name__}.turn_v1_conversations_conversation_turn_get")
    models = importlib.import_module("chatrecord_client.models")
    client = client_package.AuthenticatedClient(base_url=server.url, token=TOKEN)
    conversation = f"conv-client-{server.backend}"

    versions = []
    for text in DEMO.read_text("utf-8").splitlines():
        line = json.loads(text) | {"conversation": conversation}
        body = getattr(models, camel(line["type"])).from_dict(line)
        answer = post.sync_detailed(client=client, body=body)
        assert answer.status_code == 200, answer.content
        assert isinstance(answer.parsed, models.Recorded)
        assert (answer.parsed.conversation, answer.parsed.repeated) == (conversation, False)
        assert answer.headers["etag"] == f'"{answer.parsed.version}"'
        versions.append(answer.parsed.version)
    assert len(versions) == 19 and versions == sorted(versions)

    read = turn.sync_detailed(conversation, client=client)
    assert read.status_code == 200
    notes = read.parsed
    assert isinstance(notes, models.TurnNotes)
    assert (notes.conversation, notes.version) == (conversation, versions[-1])
    assert len(notes.notes) == 14
    assert all(isinstance(note, models.PlacedNote) for note in notes.notes)

    reads_typed(client, conversation, versions[-1])

    edit = models.MessageEditedLine.from_dict(
        {"type": "message_edited", "conversation": conversation, "at": "2026-10-31T14:06:00Z", "message": 3, "text": "und jetzt?"}
    )
    stale = post.sync_detailed(client=client, body=edit, if_match=f'"{versions[-1] - 1}"')
    assert stale.status_code == 412
    assert stale.parsed.type_.value == "urn:chatrecord:problem:version-mismatch"

    unknown = turn.sync_detailed("conv-client-never-recorded", client=client)
    assert unknown.status_code == 404
    assert unknown.parsed.type_.value == "urn:chatrecord:problem:unknown-conversation"


def reads_typed(client: object, conversation: str, version: int) -> None:
    """The demo tour's audit, activity list, replay and the store's list, read through the
    generated client: the document's response models, as objects with attributes and enums."""
    api = "chatrecord_client.api.default."
    models = importlib.import_module("chatrecord_client.models")
    read = {
        name: importlib.import_module(f"{api}{name}_v1_conversations_conversation_{name}_get")
        for name in ("audit", "activity", "replay")
    }
    listing = importlib.import_module(f"{api}conversations_v1_conversations_get")

    audit = read["audit"].sync_detailed(conversation, client=client)
    assert audit.status_code == 200
    rows = audit.parsed
    assert len(rows) == 26 and [row.version for row in rows] == sorted(row.version for row in rows)
    assert Counter(type(row).__name__ for row in rows) == {
        "StartedRow": 1,
        "SkillRow": 1,
        "MessageRow": 2,
        "SegmentRow": 8,
        "AnswerRow": 1,
        "DecisionRow": 6,
        "CardOutcomeRow": 6,
        "TourEndedRow": 1,
    }
    started = rows[0]
    assert isinstance(started, models.StartedRow)
    assert (started.conversation, started.conversation_kind.value, started.owner) == (conversation, "chat", 7)
    assert started.at == datetime(2026, 10, 28, 9, 0, tzinfo=UTC) and started.cut is False
    segments = [row for row in rows if isinstance(row, models.SegmentRow)]
    assert [s.outcome.value for s in segments] == ["awaiting_input"] + ["awaiting_approval"] * 6 + ["completed"]
    assert [s.trigger.value for s in segments] == ["turn", "answer"] + ["approval"] * 6
    assert [None if s.follows is None else s.follows.value for s in segments] == [None, "answered"] + ["approved"] * 6
    assert (segments[0].calls[0].tool, segments[0].calls[0].reading.value, segments[0].calls[0].count) == ("get_page", "ran", 1)
    assert (segments[2].written[0].record, segments[2].written[0].completeness.value) == ("pages:42", "complete")
    assert (segments[0].waiting[0].tool, segments[0].waiting[0].record) == ("ask_choice", None)
    outcomes = [row for row in rows if isinstance(row, models.CardOutcomeRow)]
    assert {(o.outcome.value, o.answer.value, o.tool) for o in outcomes} == {
        ("applied", "Übernehmen", "update_page_metadata"),
        ("applied", "Übernehmen", "set_page_social_image"),
    }
    assert [o.fields for o in outcomes] == [
        ["title"],
        ["og_image"],
        ["og_title"],
        ["og_description"],
        ["twitter_title"],
        ["twitter_description"],
    ]

    activity = read["activity"].sync_detailed(conversation, client=client)
    assert activity.status_code == 200 and len(activity.parsed) == 8
    assert all(isinstance(segment, models.SegmentActivity) for segment in activity.parsed)
    first = activity.parsed[0]
    assert first.segment == segments[0].segment
    assert [(e.kind.value, e.tool, e.label) for e in first.entries] == [
        ("tool", "get_page", "ausgeführt"),
        ("tool", "chat_set_progress", "ausgeführt"),
        ("answer", None, "Von dir beantwortet"),
    ]
    decision = activity.parsed[1].entries[-1]
    assert (decision.kind.value, decision.answer.value, decision.reading) == ("decision", "Übernehmen", None)

    replay = read["replay"].sync_detailed(conversation, client=client, at=3)
    assert replay.status_code == 200
    assert isinstance(replay.parsed, models.Replay)
    assert (replay.parsed.conversation, replay.parsed.rules.value, len(replay.parsed.turns)) == (conversation, "2026-11-02", 1)
    turn = replay.parsed.turns[0]
    assert (turn.message, turn.view_context.page_id, turn.view_context.last_page_id) == (3, 0, 42)
    assert [m.role.value for m in turn.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert len(turn.notes) == 14 and len(turn.record) == 8 and len(turn.card_outcomes) == 6
    assert [entry.ending.value for entry in turn.record][-1] == "completed"
    assert {(o.outcome.value, o.record) for o in turn.card_outcomes} == {("applied", "pages:42")}

    listed = listing.sync_detailed(client=client)
    assert listed.status_code == 200
    assert isinstance(listed.parsed, models.ConversationList) and listed.parsed.next_cursor is None
    (summary,) = listed.parsed.conversations
    assert (summary.conversation, summary.kind.value, summary.messages, summary.segments, summary.events, summary.erased) == (
        conversation,
        "chat",
        3,
        8,
        version,
        False,
    )
    assert (summary.first_at, summary.last_at) == (started.at, datetime(2026, 10, 31, 14, 5, tzinfo=UTC))
    assert (summary.owner, summary.status) == (7, [])
    status = models.ConversationsV1ConversationsGetStatusItem  # the document's enum of `status`
    chained = [status("verified"), status("unchecked")]  # the audit read above may have verified the chain
    found = listing.sync_detailed(client=client, owner=7, search="CLIENT", status=chained)
    assert [c.conversation for c in found.parsed.conversations] == [conversation]
    assert listing.sync_detailed(client=client, owner=8).parsed.conversations == []
    failed = listing.sync_detailed(client=client, status=[status("failed"), status("waiting")])
    assert (failed.status_code, failed.parsed.conversations) == (200, [])
    early = listing.sync_detailed(
        client=client, until=datetime(2026, 10, 31, 14, 5, tzinfo=UTC)
    )  # last active at 14:05: not before it
    assert early.parsed.conversations == []
