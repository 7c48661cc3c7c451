"""The timeline page over HTTP.

`/ui/` lists conversations, with search by id. `/ui/conversations/{id}` shows the timeline:
`?turn=N&rules=R` the model input at user message N under R, `?before=V` older turns, `?full=1` a full
chain check. The picture (`…/overview.svg`) and the verdict alone (`…/chain`) are requests of their own.

The UI needs the API's token: as a bearer header, or a session from `/ui/login` lasting 8 hours
(`sessions`). `POST /ui/logout` signs out. After a wrong token the client waits (429 meanwhile). Without
a token (`serve --no-auth`, loopback only) the UI is open. Every page has a Content-Security-Policy
allowing no script (`adapters.pages.SERVER_CSP`)."""

import hmac
import math
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

import orjson
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from adapters import pages
from adapters.api import (
    STATUSES,
    BadCursor,
    BadFilter,
    Chatrecord,
    NotOnTimeline,
    Report,
    Reproduction,
    TurnMissing,
    TurnNotFound,
    parse_at,
)
from adapters.http.bearer import bearer_of, check_bearer, client_of
from adapters.http.conversation_paths import ConversationRoute
from adapters.http.problems import Problem, invalid_request
from adapters.http.sessions import SESSION_SECONDS, Sessions, Throttle
from domain.errors import UnknownConversation
from domain.limits import INT_MAX
from projections.rules import Rules


def unknown(conversation: str) -> str:
    """What a page says of an id the store does not hold: the id asked for, never the store's file or ids."""
    return f"no conversation {conversation[:200]!r} in the store, nor one whose id contains it"


COOKIE = "chatrecord_ui"
LOGIN_BODY_MAX = 4096


class SignInRequired(Exception):
    """Raised by the UI's check when neither a bearer token nor a session cookie is right."""


def html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    base = {
        "Content-Security-Policy": pages.SERVER_CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    return HTMLResponse(text, status_code=status, headers=base | (headers or {}))


def install_ui(app: FastAPI, token: str | None, throttle: Throttle) -> None:
    """Adds the `/ui` routes and the redirect to the sign-in form to `app`. `throttle` counts the form's and
    the bearer headers' wrong tokens."""

    @app.exception_handler(SignInRequired)
    async def sign_in(request: Request, error: SignInRequired) -> Response:
        return RedirectResponse("/ui/login?" + urlencode({"next": str(error)}), status_code=303)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        """A page's parameter of the wrong form (`?before=abc`): an error page, with the API's status and words."""
        problem = invalid_request(error)
        if not request.url.path.startswith("/ui/"):  # the API's: a problem (`problems.install`)
            return problem.response()
        return html(pages.error_page("A parameter has the wrong form", problem.detail), status=problem.status)

    app.include_router(ui_router(token, throttle))


def ui_router(token: str | None, throttle: Throttle) -> APIRouter:
    """Returns the `/ui` routes; `token`: the API's bearer token (None: open, loopback only)."""
    sessions = Sessions(token) if token is not None else None

    async def signed_in(request: Request) -> None:
        if token is None:
            return
        if bearer_of(request) is not None and check_bearer(request, token, throttle):  # 429 while its client waits
            return
        cookie = request.cookies.get(COOKIE, "")
        if cookie and sessions is not None and sessions.valid(cookie):
            return
        raise SignInRequired(_sent_path(request) + (f"?{request.url.query}" if request.url.query else ""))

    router = APIRouter(prefix="/ui", include_in_schema=False)
    guarded = APIRouter(dependencies=[Depends(signed_in)], route_class=ConversationRoute)

    @router.get("/login")
    def login_form(next: str = "/ui/") -> Response:
        return html(pages.login_page(_local(next)))

    @router.post("/login")
    async def login(request: Request) -> Response:
        body = await request.body()
        if len(body) > LOGIN_BODY_MAX:
            raise Problem(413, "body-too-large", f"the sign-in form may hold at most {LOGIN_BODY_MAX} bytes")
        fields = parse_qs(body.decode("utf-8", "replace"))
        given, target = (fields.get("token") or [""])[0], _local((fields.get("next") or ["/ui/"])[0])
        if token is None or sessions is None:
            return RedirectResponse(target, status_code=303)
        client = client_of(request)
        wait = throttle.wait(client)
        if wait > 0:  # the token is not compared while the client waits
            seconds = math.ceil(wait)
            return html(pages.login_page(target, wait=seconds), status=429, headers={"Retry-After": str(seconds)})
        if not hmac.compare_digest(given.encode(), token.encode()):
            seconds = math.ceil(throttle.failed(client))
            return html(pages.login_page(target, failed=True), status=401, headers={"Retry-After": str(seconds)})
        throttle.passed(client)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            sessions.new(),
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            path="/ui",
            secure=request.url.scheme == "https",
        )
        return response

    @router.post("/logout")
    def logout(request: Request) -> Response:
        """Ends the session of the request's cookie and deletes the cookie."""
        if sessions is not None:
            sessions.revoke(request.cookies.get(COOKIE, ""))
        response = html(pages.login_page("/ui/", signed_out=True))
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    async def service(request: Request) -> Chatrecord:
        chatrecord: Chatrecord = request.app.state.chatrecord  # set by the app's lifespan
        return chatrecord

    Service = Annotated[Chatrecord, Depends(service)]

    @guarded.get("/")
    def conversations(
        chatrecord: Service,
        q: str = "",
        after: str | None = None,
        owner: str = "",
        since: str = "",
        until: str = "",
        status: Annotated[list[str] | None, Query()] = None,
    ) -> Response:
        """The stored conversations, a page at a time, filtered as `chatrecord list` filters
        them (`q`: a part of the id; `owner`, `since`, `until`, `status`); a `q` that is a whole
        stored id opens that conversation."""
        query = q.strip()
        asked = {"q": query, "owner": owner.strip(), "since": since.strip(), "until": until.strip(), "status": status or []}
        try:
            filters = _filters(asked)
        except ValueError as error:
            return html(pages.error_page("No such filter", str(error)), status=400)
        if query and not after:
            try:
                chatrecord.timeline(query, turns=1)
            except UnknownConversation:
                pass
            else:
                return RedirectResponse(pages.conversation_path(query), status_code=303)
        try:
            rows, following = _listing(chatrecord, after, filters)
        except BadCursor as error:
            return html(pages.error_page("No such page", str(error)), status=400)
        except BadFilter as error:
            return html(pages.error_page("No such filter", str(error)), status=400)
        if query and not rows and not after:
            return html(pages.list_page(rows, asked, following, unknown(query)), status=404)
        return html(pages.list_page(rows, asked, following))

    @guarded.get("/conversations/{conversation:path}/overview.svg")
    def overview(chatrecord: Service, conversation: str) -> Response:
        svg = chatrecord.overview_drawn(conversation, pages.overview_svg)
        return Response(
            svg,
            media_type="image/svg+xml",
            headers={
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-store",
            },
        )

    @guarded.get("/conversations/{conversation:path}/events")
    def raw_events(
        chatrecord: Service, conversation: str, first: Annotated[int, Query(alias="from", ge=1, le=2147483647)] = 1
    ) -> Response:
        """The conversation's events as stored (ciphertexts as sealed), each with its chain
        link, a page of versions at a time (`adapters.service.raw_events`)."""
        try:
            page = chatrecord.raw_events(conversation, first)
        except UnknownConversation:
            return html(pages.error_page("No such conversation", unknown(conversation)), status=404)
        return html(pages.raw_page(conversation, page))

    @guarded.get("/conversations/{conversation:path}/rules")
    def rules_diff(
        chatrecord: Service,
        conversation: str,
        other: Annotated[Rules | None, Query()] = None,
        start: Annotated[int, Query(ge=0, le=2147483647)] = 0,
    ) -> Response:
        """The conversation read under another rule set beside the live one, turn by turn:
        notes added and dropped, the page line where it differs; a page of turns at a time."""
        active = chatrecord.active_rules()
        chosen = other.value if other else next(r.value for r in Rules if r.value != active)
        try:
            turns, more = chatrecord.rules_diff(conversation, chosen, start=start)
        except UnknownConversation:
            return html(pages.error_page("No such conversation", unknown(conversation)), status=404)
        return html(pages.rules_diff_page(conversation, active, chosen, turns, more, start))

    @guarded.get("/conversations/{conversation:path}/compare")
    def compare(
        chatrecord: Service,
        conversation: str,
        first: Annotated[int, Query(ge=1, le=2147483647)],
        second: Annotated[int, Query(ge=1, le=2147483647)],
        rules: Annotated[Rules | None, Query()] = None,
    ) -> Response:
        """The turn of user message `second` as what changed since the turn of `first`."""
        try:
            compared = chatrecord.compare_turns(conversation, first, second, rules.value if rules else None)
        except UnknownConversation:
            return html(pages.error_page("No such conversation", unknown(conversation)), status=404)
        except TurnMissing as error:
            return html(pages.error_page("No such turn", str(error)), status=404)
        return html(pages.compare_page(conversation, rules.value if rules else chatrecord.active_rules(), compared))

    def download(body: bytes, media_type: str, name: str) -> Response:
        return Response(
            body,
            media_type=media_type,
            headers={
                "Content-Disposition": f'inline; filename="{name}"',
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'none'",
            },
        )

    @guarded.get("/conversations/{conversation:path}/audit.json")
    def audit_file(chatrecord: Service, conversation: str) -> Response:
        """`chatrecord audit --json` of the conversation (as `GET /v1/…/audit`), for a browser's session."""
        done = chatrecord.audit(conversation, chain=True)
        return download(orjson.dumps(done.to_json()), "application/json", "audit.json")

    @guarded.get("/conversations/{conversation:path}/export.jsonl")
    def export_file(chatrecord: Service, conversation: str) -> Response:
        """The conversation as the chat's JSON Lines (as `GET /v1/…/export`), for a browser's
        session: sent as text, so that a browser shows it rather than saving it."""
        done = chatrecord.export(conversation)
        return download(b"".join(orjson.dumps(line) + b"\n" for line in done.lines), "text/plain; charset=utf-8", "export.jsonl")

    @guarded.get("/conversations/{conversation:path}/trace.json")
    def trace_file(chatrecord: Service, conversation: str) -> Response:
        """The conversation's trace as OTLP/JSON (`chatrecord traces --json`), without texts."""
        return download(chatrecord.trace_json(conversation).encode(), "application/json", "trace.json")

    @guarded.get("/conversations/{conversation:path}/chain")
    def chain(chatrecord: Service, conversation: str, full: Annotated[bool, Query()] = False) -> Response:
        verdict = chatrecord.chain(conversation, full=full)
        return html(pages.chain_page(verdict))

    @guarded.get("/conversations/{conversation:path}")
    def conversation_page(
        chatrecord: Service,
        conversation: str,
        turn: Annotated[int | None, Query(ge=1, le=2147483647)] = None,
        rules: Annotated[Rules | None, Query()] = None,
        before: Annotated[int | None, Query(ge=2, le=2147483647)] = None,
        full: Annotated[bool, Query()] = False,
        jump: Annotated[str | None, Query(max_length=300)] = None,
    ) -> Response:
        if jump is not None and jump.strip():  # the jump box: to the page that shows it, at its anchor
            try:
                found = chatrecord.locate(conversation, jump)
            except UnknownConversation:
                return html(pages.error_page("No such conversation", unknown(conversation)), status=404)
            except NotOnTimeline as error:
                return html(pages.error_page("Not in this conversation", str(error)), status=404)
            older = "?" + urlencode({"before": found.before}) if found.before is not None else ""
            return RedirectResponse(f"{pages.conversation_path(conversation)}{older}#{found.anchor}", status_code=303)
        try:
            page = chatrecord.timeline(conversation, before=before)
            selected = chatrecord.turn_view(conversation, turn, rules.value if rules else None) if turn is not None else None
        except UnknownConversation:
            return html(pages.error_page("No such conversation", unknown(conversation)), status=404)
        except TurnNotFound as error:
            return html(pages.error_page("No such turn", str(error)), status=404)
        # on open, the next model call's notes as the chat reads them (flat at any length); a
        # turn's whole input (the transcript with the notes in place) only when asked for
        next_call = chatrecord.turn_notes(conversation) if turn is None and before is None else None
        latest = next((t.number for t in page.turns if t.kind != "start"), None) if before is None else None
        verdict = chatrecord.chain(conversation, full=full)  # shown whole in the page: what it checked, when, by what
        runs = reproduction_runs(chatrecord.reproductions(conversation))  # chatrecord reproduce: a line per run
        drawn = chatrecord.overview_drawn(conversation, pages.overview_linked)  # inline: its marks link, its titles show
        text = pages.conversation_page(
            page,
            static=False,
            chain=verdict,
            overview=drawn,
            selected=selected,
            next_call=next_call,
            latest_message=latest,
            reproduced=runs,
        )
        return html(text)

    router.include_router(guarded)
    return router


def reproduction_runs(kept: list[Reproduction]) -> list[str]:
    """Returns a line per run of `chatrecord reproduce`: when, the model, the turn and the count in the
    spec's form."""
    runs: dict[str, list[Reproduction]] = {}
    for done in kept:
        runs.setdefault(done.started_at, []).append(done)
    return [
        f"{at} · {streams[0].model} · the turn of message {streams[0].message}: {Report(streams[0].conversation, tuple(streams)).sentence()}"
        for at, streams in runs.items()
    ]


def _sent_path(request: Request) -> str:
    """Returns the request's path as sent, where an id's `%2F` stays encoded (the decoded path would name
    another page: `conversation_paths`)."""
    raw = request.scope.get("raw_path")
    try:
        return raw.decode("ascii").partition("?")[0] if raw else quote(request.url.path)
    except UnicodeDecodeError:
        return quote(request.url.path)


def _local(path: str) -> str:
    """Returns `path` when it is a path of the UI, else `/ui/` (no open redirect)."""
    return path if path.startswith("/ui/") and not path.startswith("//") and "\\" not in path else "/ui/"


def _filters(asked: dict[str, Any]) -> dict[str, Any]:
    """Returns the `Chatrecord.conversations` keyword arguments the list form asked for (`q`, `owner`,
    `since`, `until`, `status`). An empty field asks nothing. Raises ValueError naming a bad field."""
    found: dict[str, Any] = {"search": asked["q"] or None, "status": tuple(asked["status"])}
    if asked["owner"]:
        if not asked["owner"].isdigit() or int(asked["owner"]) > INT_MAX:
            raise ValueError(f"owner: {asked['owner'][:40]!r} is not a user id (a whole number, 0 to {INT_MAX})")
        found["owner"] = int(asked["owner"])
    for name in ("since", "until"):
        if asked[name]:
            try:
                found[name] = parse_at(asked[name])
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
    wrong = [s for s in found["status"] if s not in STATUSES]
    if wrong:
        raise ValueError(f"status: {wrong[0][:40]!r} is none of {', '.join(STATUSES)}")
    return found


def _listing(chatrecord: Chatrecord, after: str | None, filters: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Returns a page of conversations, newest activity first, with `filters`, and the next cursor (None:
    the last). `after` is a previous page's cursor. Raises BadCursor for a cursor no page returned.
    Raises BadFilter for refused filters."""
    asked = dict(filters)
    since = asked.pop("since", None)
    found = chatrecord.conversations(50, after, since, **asked)
    return [summary.to_json() for summary in found.conversations], found.cursor
