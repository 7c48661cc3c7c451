"""The HTTP service's reads (`add_reads`): the list, the usage audit and, per conversation, export, turn notes, audit,
activity list and replay. Each is one `Chatrecord` call (the `Service` dependency).

No `from __future__ import annotations` here: FastAPI reads the handlers' annotations."""

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from adapters.api import (
    AT_PATTERN,
    CURSOR_PATTERN,
    LIST_LIMIT_MAX,
    REPLAY_CURSOR_PATTERN,
    REPLAY_LIMIT_MAX,
    USAGE_CURSOR_PATTERN,
    USAGE_LIMIT_MAX,
    BadCursor,
    BadFilter,
    BadReplayCursor,
    BadUsageCursor,
    Chatrecord,
    ReplayForm,
    TurnRange,
    parse_at,
    replay_start,
)
from adapters.http import audit_schema, openapi, schemas
from adapters.http.headers import JSON, NDJSON, ReadAfter, etag
from adapters.http.offload import offload
from adapters.http.problems import Problem
from domain.limits import INT_MAX
from projections.page_line import PageFilter
from projections.rules import Rules

REPLAY_PAGE = 50
"""Turns on a page of `GET …/replay` when no limit is given."""
Conversation = Annotated[str, Path(description="The conversation id, as the chat names it.")]
RulesQuery = Annotated[Rules | None, Query(description="Rule set (default: the store's live one).")]
VisiblePage = Annotated[list[int], Query(description="A page the user may see (repeatable); when given, only these.")]
HiddenPage = Annotated[list[int], Query(description="A page the user may not see (repeatable).")]


def service(request: Request) -> Chatrecord:
    """Returns the app's Chatrecord (`Service`, the dependency of every handler, FastAPI calls on
    the event loop: `current`)."""
    chatrecord: Chatrecord = request.app.state.chatrecord  # set by the app's lifespan
    return chatrecord


async def current(request: Request) -> Chatrecord:
    """Returns the app's Chatrecord (an async dependency: no hop to a thread)."""
    return service(request)


Service = Annotated[Chatrecord, Depends(current)]


def json_response(value: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    """Returns `value` as a JSON response (orjson) with `headers` and `status`."""
    return Response(orjson.dumps(value), status_code=status, media_type=JSON, headers=headers)


def add_reads(v1: APIRouter, of_a_conversation: dict[int | str, dict[str, Any]]) -> None:
    """Adds the reads to the `/v1` router. `of_a_conversation`: the problems a conversation's operations
    add."""

    @v1.get(
        "/conversations",
        response_model=schemas.ConversationList,
        response_description="A page of conversations, newest activity first",
    )
    def conversations(
        chatrecord: Service,
        after: ReadAfter = None,
        *,
        limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX, description="At most this many a page.")] = 50,
        cursor: Annotated[
            str | None, Query(description="The next_cursor of the page before.", json_schema_extra={"pattern": CURSOR_PATTERN})
        ] = None,
        since: Annotated[
            str | None,
            Query(
                description="Only those active at or after this ISO-8601 time (the chat's time of their last activity).",
                json_schema_extra={"format": "date-time", "pattern": AT_PATTERN},
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                description="Only those last active before this ISO-8601 time (at or before `since`: none).",
                json_schema_extra={"format": "date-time", "pattern": AT_PATTERN},
            ),
        ] = None,
        owner: Annotated[
            int | None, Query(ge=0, le=INT_MAX, description="Only the conversations of this owner (user id).")
        ] = None,
        search: Annotated[
            str | None,
            Query(max_length=200, description="Only those whose id contains this text (letters in either case, no wildcards)."),
        ] = None,
        status: Annotated[
            list[schemas.ListStatus] | None,
            Query(description="Only those with this status (repeatable: any of those given)."),
        ] = None,
    ) -> Response:
        """The store's conversations, newest activity first, a page at a time: the object of
        `chatrecord list --json`, `{"conversations": [...], "next_cursor": ...}`, filtered as
        `chatrecord list --owner --since --until --search --status` filters it."""
        times = {}
        for name, value in (("since", since), ("until", until)):
            if value is not None:
                try:
                    times[name] = parse_at(value)
                except ValueError as error:
                    raise Problem(400, "bad-request", f"{name}: {error}", where=f"query.{name}") from None
        try:
            page = chatrecord.conversations(
                limit,
                cursor,
                times.get("since"),
                until=times.get("until"),
                owner=owner,
                search=search or None,
                status=tuple(status or ()),
                after=after,
            )
        except BadCursor as error:
            raise Problem(400, "bad-request", str(error), where="query.cursor") from None
        except BadFilter as error:
            raise Problem(400, "bad-request", str(error), where=f"query.{error.field}") from None
        return json_response(page.to_json())

    @v1.get(
        "/usage",
        response_model=schemas.UsageReport,
        response_description="The usage of the range's segments: the total and a page of groups",
    )
    def usage(
        chatrecord: Service,
        after: ReadAfter = None,
        *,
        by: Annotated[
            Literal["conversation", "owner", "day"], Query(description="Sum per conversation, per owner or per day (UTC).")
        ] = "conversation",
        since: Annotated[
            str | None,
            Query(
                description="Only segments at or after this ISO-8601 time (the chat's time).",
                json_schema_extra={"format": "date-time", "pattern": AT_PATTERN},
            ),
        ] = None,
        until: Annotated[
            str | None,
            Query(
                description="Only segments before this ISO-8601 time (at or before `since`: none).",
                json_schema_extra={"format": "date-time", "pattern": AT_PATTERN},
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=USAGE_LIMIT_MAX, description="At most this many groups a page.")] = 50,
        cursor: Annotated[
            str | None,
            Query(
                description="The next_cursor of the page before; it carries its grouping, which it takes over `by`.",
                json_schema_extra={"pattern": USAGE_CURSOR_PATTERN},
            ),
        ] = None,
    ) -> Response:
        """The usage audit: tokens, estimated cost, model calls, tool calls, failed and refused calls
        and time of the segments in a range of the chat's time, summed per conversation, owner or
        day, a page of groups at a time, with the range's total: the object of
        `chatrecord usage --json`. Read from the flat usage rows kept with each segment."""
        times = {}
        for name, value in (("since", since), ("until", until)):
            if value is not None:
                try:
                    times[name] = parse_at(value)
                except ValueError as error:
                    raise Problem(400, "bad-request", f"{name}: {error}", where=f"query.{name}") from None
        try:
            page = chatrecord.usage(by, times.get("since"), times.get("until"), limit, cursor, after=after)
        except BadUsageCursor as error:
            raise Problem(400, "bad-request", str(error), where="query.cursor") from None
        return json_response(page.to_json())

    @v1.get(
        "/conversations/{conversation:path}/export",
        response_class=Response,
        responses=of_a_conversation
        | {
            200: {
                "content": {NDJSON[0]: {"schema": {"type": "string", "description": "JSON Lines of the input format"}}},
                "description": "The conversation as the chat's JSON Lines",
                "headers": {"Chatrecord-Erased": openapi.ERASED, "Chatrecord-Chain": openapi.CHAIN_BROKEN},
            }
        },
    )
    def export(
        chatrecord: Service,
        conversation: Conversation,
        after: ReadAfter = None,
        *,
        upto: Annotated[
            int | None,
            Query(
                ge=1,
                description="Stop after user message N (a 404 no-such-turn problem when the conversation has no user message N).",
            ),
        ] = None,
        with_reproductions: Annotated[
            bool,
            Query(
                description="Add the kept reproductions after the lines, one reproduction record a line "
                "(`chatrecord export --with-reproductions`), which `chatrecord ingest` reads back."
            ),
        ] = False,
    ) -> Response:
        """The conversation as the chat's JSON Lines (`chatrecord export`), made from the store's
        events: ingested into an empty store, the same turns and audit. An erased conversation's
        texts read `[erased]` (header `Chatrecord-Erased: true`); a conversation whose hash chain
        does not verify is exported as the store holds it, with header `Chatrecord-Chain: broken`
        (`chatrecord verify` names the break)."""
        done = chatrecord.export(conversation, upto, with_reproductions=with_reproductions, after=after)
        body = b"".join(orjson.dumps(line) + b"\n" for line in done.records())
        headers = {"Chatrecord-Erased": "true"} if done.erased else {}
        if done.broken is not None:
            headers["Chatrecord-Chain"] = "broken"
        return Response(body, media_type=NDJSON[0], headers=headers)

    @v1.get(
        "/conversations/{conversation:path}/turn",
        response_model=schemas.TurnNotes,
        responses=of_a_conversation | {200: {"headers": {"Chatrecord-Chain": openapi.TURN_CHAIN_BROKEN}}},
    )
    async def turn(
        chatrecord: Service,
        conversation: Conversation,
        after: ReadAfter = None,
        *,
        visible_page: VisiblePage = [],  # noqa: B006 - FastAPI copies a Query default per request
        hidden_page: HiddenPage = [],  # noqa: B006
        messages: Annotated[schemas.Full | None, Query(description="`full` adds the whole model input.")] = None,
    ) -> Response:
        """The chat's read of the next turn: the page line and each note with its place in the
        transcript the chat holds. A page the user may not see is never named. Where the store
        keeps a break of the conversation's hash chain, header `Chatrecord-Chain: broken` (the
        stored verdict, one row read: no hash is recomputed on this read)."""
        can_see = PageFilter(frozenset(visible_page), frozenset(hidden_page))
        return await turn_read(chatrecord, conversation, can_see, after, messages is not None)

    @v1.get(
        "/conversations/{conversation:path}/audit",
        response_model=list[audit_schema.AuditRow],
        response_description="The audit's rows, in order, each by its kind",
        responses=of_a_conversation | {200: {"headers": {"Chatrecord-Chain": openapi.AUDIT_CHAIN_BROKEN}}},
    )
    def audit(chatrecord: Service, conversation: Conversation, rules: RulesQuery = None, after: ReadAfter = None) -> Response:
        """Everything that ran, was written, decided, left undecided or cut, in order, with
        times: the rows of `chatrecord audit --json`, each `verified` when its event lies before
        any broken link of the hash chain; a chain that does not verify adds header
        `Chatrecord-Chain: broken` (`chatrecord verify` names the break)."""
        done = chatrecord.audit(conversation, rules.value if rules else None, chain=True, after=after)
        broken = done.chain is not None and not done.chain.ok
        return json_response(done.to_json(), headers={"Chatrecord-Chain": "broken"} if broken else None)

    @v1.get(
        "/conversations/{conversation:path}/activity",
        response_model=list[schemas.SegmentActivity],
        response_description="The activity list, segment by segment",
        responses=of_a_conversation,
    )
    def activity(chatrecord: Service, conversation: Conversation, rules: RulesQuery = None, after: ReadAfter = None) -> Response:
        """The activity list the chat shows the editor, segment by segment."""
        segments = chatrecord.activity(conversation, rules.value if rules else None, after=after)
        return json_response([s.model_dump(mode="json") for s in segments])

    ReplayLimit = Annotated[int, Query(ge=1, le=REPLAY_LIMIT_MAX, description="At most this many turns a page.")]
    ReplayCursorQuery = Annotated[
        str | None,
        Query(description="The next_cursor of the page before.", json_schema_extra={"pattern": REPLAY_CURSOR_PATTERN}),
    ]

    @v1.get(
        "/conversations/{conversation:path}/replay",
        response_model=schemas.Replay,
        response_description="A page of turns, each turn's model input as it was then",
        responses=of_a_conversation,
    )
    def replay(
        chatrecord: Service,
        conversation: Conversation,
        rules: RulesQuery = None,
        after: ReadAfter = None,
        *,
        at: Annotated[
            int | None, Query(ge=1, description="Only the turns of user message N, whole: no page, limit and cursor unread.")
        ] = None,
        limit: ReplayLimit = REPLAY_PAGE,
        cursor: ReplayCursorQuery = None,
        visible_page: VisiblePage = [],  # noqa: B006 - FastAPI copies a Query default per request
        hidden_page: HiddenPage = [],  # noqa: B006
    ) -> Response:
        """Every turn's model input as it was then, a page of `limit` turns at a time, oldest
        first: the object of `chatrecord replay --json` with `next_cursor`. With `at`, the turns
        of that user message, whole, as `replay --at N` (no page: no `next_cursor`)."""
        pages = PageFilter(frozenset(visible_page), frozenset(hidden_page))
        if at is not None:  # one turn, whole, as before: no page, so limit and cursor are not read
            done = chatrecord.replay(conversation, rules.value if rules else None, at, pages, after=after)
            return json_response(done.to_json())
        return replay_page(chatrecord, conversation, rules, pages, after, "turns", limit, cursor)

    @v1.get(
        "/conversations/{conversation:path}/replay/changes",
        response_model=schemas.ReplayChanges,
        response_description="A page of turns, each as what changed since the turn before",
        responses=of_a_conversation,
    )
    def replay_changes(
        chatrecord: Service,
        conversation: Conversation,
        rules: RulesQuery = None,
        after: ReadAfter = None,
        *,
        limit: ReplayLimit = REPLAY_PAGE,
        cursor: ReplayCursorQuery = None,
        visible_page: VisiblePage = [],  # noqa: B006 - FastAPI copies a Query default per request
        hidden_page: HiddenPage = [],  # noqa: B006
    ) -> Response:
        """Every turn as what changed since the turn before, a page of `limit` turns at a time,
        oldest first (`chatrecord replay --changes`; the first turn of a page counts from the
        last of the page before): a whole history costs what its length holds."""
        pages = PageFilter(frozenset(visible_page), frozenset(hidden_page))
        return replay_page(chatrecord, conversation, rules, pages, after, "changes", limit, cursor)


async def turn_read(chatrecord: Chatrecord, conversation: str, can_see: PageFilter, after: str | None, full: bool) -> Response:
    """Returns `GET …/turn`'s response, read on a store thread (`offload`): the turn's notes, the whole
    model input with `full`, the ETag, and `Chatrecord-Chain: broken` where the store keeps a break.
    The route and the hot path (`hot_routes`) both answer with it."""

    def read() -> Response:
        notes = chatrecord.turn_notes(conversation, can_see, after=after)
        payload = notes.to_json()
        if full:
            payload["messages"] = chatrecord.turn_input(conversation, can_see, after=after).model_messages()
        headers = etag(notes.version)
        if chatrecord.stored_break(conversation, after=after) is not None:
            headers["Chatrecord-Chain"] = "broken"
        return json_response(payload, headers)

    return await offload(read)


def replay_page(
    chatrecord: Chatrecord,
    conversation: str,
    rules: Rules | None,
    pages: PageFilter,
    after: str | None,
    form: ReplayForm,
    limit: int,
    cursor: str | None,
) -> Response:
    """Returns a page of the streamed replay, written turn by turn (`Chatrecord.replay_stream`):
    `{"conversation", "rules", "turns": [...], "next_cursor"}`."""
    try:
        span = TurnRange(start=replay_start(cursor), limit=limit)
    except BadReplayCursor as error:
        raise Problem(400, "bad-request", str(error), where="query.cursor") from None
    stream = chatrecord.replay_stream(conversation, rules.value if rules else None, pages, form=form, span=span, after=after)

    def body() -> Iterator[bytes]:
        yield orjson.dumps(stream.head())[:-1] + b',"turns":['
        for index, turn in enumerate(stream.turns):
            yield (b"," if index else b"") + orjson.dumps(turn)
        yield b'],"next_cursor":' + orjson.dumps(stream.next_cursor) + b"}"

    return StreamingResponse(body(), media_type=JSON)
