"""A Python client generated from docs/openapi.json (`openapi-python-client`) drives the demo
tour against a live `chatrecord serve`: every line recorded, the turn read with its notes, a
stale If-Match answered 412, an unknown conversation 404, all as the client's typed objects
(issue 23, item 3)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
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
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(OPENAPI),
         "--output-path", str(package), "--meta", "none"],
        capture_output=True, text=True, check=False,
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

    edit = models.MessageEditedLine.from_dict({"type": "message_edited", "conversation": conversation,
                                               "at": "2026-10-31T14:06:00Z", "message": 3, "text": "und jetzt?"})
    stale = post.sync_detailed(client=client, body=edit, if_match=f'"{versions[-1] - 1}"')
    assert stale.status_code == 412
    assert stale.parsed.type_.value == "urn:chatrecord:problem:version-mismatch"

    unknown = turn.sync_detailed("conv-client-never-recorded", client=client)
    assert unknown.status_code == 404
    assert unknown.parsed.type_.value == "urn:chatrecord:problem:unknown-conversation"
