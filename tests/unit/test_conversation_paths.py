"""How a conversation's raw path is split into the id and the sub-path (`adapters.http.conversation_paths`)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.http.conversation_paths import SUB_PATHS, named, split

UI = SUB_PATHS["/ui/conversations/"]


def scope(raw: bytes, path: str, root: str = "") -> dict[str, Any]:
    return {"type": "http", "raw_path": raw, "path": path, "root_path": root}


@pytest.mark.parametrize(
    ("raw", "found"),
    [
        ("conv-7", ("conv-7", "")),
        ("conv-7%2Fchain", ("conv-7/chain", "")),
        ("conv-7%2Fchain/chain", ("conv-7/chain", "chain")),
        ("a%2Fb%2Fevents/events", ("a/b/events", "events")),
        ("x%252Fy/overview.svg", ("x%2Fy", "overview.svg")),
        ("%C3%BC%2F%C3%BC/audit.json", ("ü/ü", "audit.json")),
        ("%2E%2E", ("..", "")),
        ("", ("", "")),
        ("conv-7/chain", ("conv-7", "chain")),
        ("a/b", None),  # a plain slash before no sub-path: the decoded path decides, as before
        ("a/b/events", None),
        ("conv-7/", None),
        ("conv-7/chain/", None),
    ],
)
def test_the_id_is_the_first_raw_segment_and_a_listed_sub_path_follows(raw: str, found: tuple[str, str] | None) -> None:
    assert split(raw, UI) == found


def test_the_api_takes_its_own_sub_paths() -> None:
    api = SUB_PATHS["/v1/conversations/"]

    assert split("conv-7%2Freplay/replay/changes", api) == ("conv-7/replay", "replay/changes")
    assert split("turn/turn", api) == ("turn", "turn")
    assert split("conv-7/chain", api) is None


def test_named_reads_the_raw_path_after_the_prefix_and_the_root_path() -> None:
    assert named(scope(b"/ui/conversations/conv-7%2Fchain", "/ui/conversations/conv-7/chain")) == (
        "/ui/conversations/",
        "conv-7/chain",
        "",
    )
    assert named(scope(b"/app/v1/conversations/t%2Fturn/turn", "/app/v1/conversations/t/turn/turn", "/app")) == (
        "/v1/conversations/",
        "t/turn",
        "turn",
    )
    assert named(scope(b"/v1/conversations/a/turn?x=1", "/v1/conversations/a/turn")) == ("/v1/conversations/", "a", "turn")


@pytest.mark.parametrize(
    "asked",
    [
        scope(b"/ui/%63onversations/a%2Fb", "/ui/conversations/a/b"),  # the prefix sent encoded
        scope(b"", "/ui/conversations/a/b"),  # a server that gives no raw path
        scope(b"/ui/", "/ui/"),  # under no prefix
        scope(b"/other/ui/conversations/a", "/other/ui/conversations/a"),  # not the app's root path
        {"type": "websocket", "raw_path": b"/ui/conversations/a", "path": "/ui/conversations/a"},
    ],
)
def test_named_leaves_other_paths_to_the_decoded_path(asked: dict[str, Any]) -> None:
    assert named(asked) is None
