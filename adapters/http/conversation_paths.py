"""A conversation's routes matched on the raw path, so that an id reaches its own pages.

An id may hold `/` (`conv-7/chain`). The server decodes `%2F` before routing, so on the decoded path
`/ui/conversations/conv-7/chain` names both conv-7's chain and conv-7/chain's page; the routes'
`{conversation:path}` took the first. `ConversationRoute` looks at the path as sent (`raw_path`), where
an encoded slash stays apart from a separator: the id is the first segment (percent-decoded, its
slashes sent as `%2F`, as `quote(id, safe="")` and the clients send them) and what follows is one of the
sub-paths named in SUB_PATHS, or nothing for the conversation's own page. A raw path that is not of this
form (an id sent with literal slashes, `/ui/conversations/a/b/events`) is matched as before, on the
decoded path, the first route in order winning.

The routes keep their paths, so the OpenAPI document does not change."""

from __future__ import annotations

from urllib.parse import unquote

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

PARAM = "{conversation:path}"
SUB_PATHS: dict[str, frozenset[str]] = {
    "/ui/conversations/": frozenset(
        ("events", "rules", "compare", "audit.json", "export.jsonl", "trace.json", "overview.svg", "chain")
    ),
    "/v1/conversations/": frozenset(("export", "turn", "audit", "activity", "replay", "replay/changes", "reproductions")),
}
"""Per path prefix, the sub-paths of a conversation ("" is its own page, not listed). Each route with
`{conversation:path}` under a prefix ends in one of these (a test checks it)."""
KEPT = "chatrecord.conversation_path"
"""The scope's key of what `named` found: the raw path, the path and the result."""
STAND_IN = "-"
"""The id put in the path the route's own pattern is matched against once the raw path has named the id."""


def route_path(scope: Scope) -> str:
    """Returns the request's path within the app (without its root path), as Starlette's routes match it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    if path == root:
        return ""
    return path[len(root) :] if path[len(root)] == "/" else path


def split(raw_rest: str, subs: frozenset[str]) -> tuple[str, str] | None:
    """Returns the id (percent-decoded) and the sub-path ("" for the page) that `raw_rest`, the raw path
    after a prefix, names: the id as one segment, then nothing or `/` and one of `subs`. None when it is not
    of this form (an id with literal slashes), to be matched on the decoded path."""
    segment, slash, rest = raw_rest.partition("/")
    if not slash:
        return unquote(segment), ""
    if rest in subs:
        return unquote(segment), rest
    return None


def named(scope: Scope) -> tuple[str, str, str] | None:
    """Returns the prefix, the id and the sub-path that the request's raw path names (`split`). None
    when the path is under no prefix of SUB_PATHS, has no raw form, or the raw form does not start with
    the prefix as such (after the app's root path). Found once a request: kept in its scope under KEPT
    for the other routes it is matched against."""
    kept = scope.get(KEPT)
    if kept is not None and kept[0] is scope.get("raw_path") and kept[1] == scope["path"]:
        return kept[2]  # type: ignore[no-any-return]
    found = _named(scope)
    scope[KEPT] = (scope.get("raw_path"), scope["path"], found)
    return found


def _named(scope: Scope) -> tuple[str, str, str] | None:
    if scope["type"] != "http":
        return None
    inner = route_path(scope)
    prefix = next((p for p in SUB_PATHS if inner.startswith(p)), None)
    raw = scope.get("raw_path")
    if prefix is None or not raw:
        return None
    text = raw.decode("latin-1").partition("?")[0]
    at = text.find(prefix)
    if at < 0 or unquote(text[:at]) != scope["path"][: len(scope["path"]) - len(inner)]:
        return None
    found = split(text[at + len(prefix) :], SUB_PATHS[prefix])
    return None if found is None else (prefix, *found)


class ConversationRoute(APIRoute):
    """An APIRoute whose path holds `{conversation:path}` matches the request whose raw path names an id
    and this route's sub-path (`named`), and hands the route that id; other routes match as APIRoute's do."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if PARAM not in self.path:
            return super().matches(scope)
        found = named(scope)
        if found is None:
            return super().matches(scope)
        prefix, conversation, sub = found
        tail = "/" + sub if sub else ""
        if not (prefix + PARAM + tail).endswith(self.path):  # another sub-path, or another prefix's route
            return Match.NONE, {}
        root = scope["path"][: len(scope["path"]) - len(route_path(scope))]
        match, child = super().matches({**scope, "path": root + prefix + STAND_IN + tail})
        if match is not Match.NONE:
            child["path_params"] = {**child.get("path_params", {}), "conversation": conversation}
        return match, child
