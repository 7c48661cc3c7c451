"""Finding a conversation on the served list page in a real browser (headless Chromium), on a
SQLite store and a PostgreSQL one (issue 39, item 3): the rows newest activity first (the
chat's time, not the order they were stored in) with a status column; search by a part of the
id; the filters by owner, time range, outcome (a failed segment, a card waiting, one left
undecided), erased and the chain's state; and the next page. Each list the page shows is the
one `chatrecord list --json` and `GET /v1/conversations` give for the same filters."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from domain.events import conversation_uuid
from tests.browser.conftest import TOKEN, screenshot
from tests.browser.test_list_page import listed
from tests.browser.test_timeline_page import sign_in
from tests.e2e.conftest import DEMO, runner
from tests.http.conftest import start, stop
from tests.http.test_ui_tools import BEHALTEN

FILLERS = 52
"""Conversations `c-00` … `c-51` (owner 5, only started, in September): more than the page's 50."""

NEWEST = ["conv-demo-seo", "conv-behalten", "conv-waiting-x", "conv-erased-x", "conv-undecided-x", "conv-failed-x", "conv-late-x"]
"""The list's first rows, newest activity first (stored in another order: the fillers and the
`-x` ones first, then the demo and the Behalten tour, `conv-late-x` last)."""


def started(conversation: str, owner: int, at: str) -> dict[str, Any]:
    return {"type": "conversation_started", "conversation": conversation, "at": at, "kind": "chat", "owner": owner}


def message(conversation: str, number: int, at: str) -> dict[str, Any]:
    return {
        "type": "user_message",
        "conversation": conversation,
        "at": at,
        "message": number,
        "text": "Frage",
        "page": 7,
        "skill": None,
    }


def segment(conversation: str, at: str, outcome: str) -> dict[str, Any]:
    line = {
        "type": "segment_returned",
        "conversation": conversation,
        "at": at,
        "segment": f"{conversation}-run/1",
        "run": f"{conversation}-run",
        "trigger": "turn",
        "outcome": outcome,
        "answer": "Antwort",
        "steps": [{"kind": "llm", "round": 1, "durationMs": 900.0, "content": ""}],
    }
    if outcome == "awaiting_approval":
        line["pending"] = [{"toolName": "update_page_metadata", "table": "pages", "uid": 7, "fields": ["title"]}]
    return line


def lines() -> list[dict[str, Any]]:
    """A failed segment (owner 3), a card left undecided by the next message (owner 3), a
    conversation to erase (owner 4), a card waiting (owner 4), and the fillers."""
    found = [started("conv-failed-x", 3, "2026-10-20T10:00:00Z"), message("conv-failed-x", 1, "2026-10-20T10:01:00Z")]
    found += [segment("conv-failed-x", "2026-10-20T10:02:00Z", "failed")]
    found += [started("conv-undecided-x", 3, "2026-10-21T10:00:00Z"), message("conv-undecided-x", 1, "2026-10-21T10:01:00Z")]
    found += [segment("conv-undecided-x", "2026-10-21T10:02:00Z", "awaiting_approval")]
    found += [message("conv-undecided-x", 2, "2026-10-21T10:03:00Z")]
    found += [started("conv-erased-x", 4, "2026-10-22T10:00:00Z"), message("conv-erased-x", 1, "2026-10-22T10:01:00Z")]
    found += [started("conv-waiting-x", 4, "2026-10-23T10:00:00Z"), message("conv-waiting-x", 1, "2026-10-23T10:01:00Z")]
    found += [segment("conv-waiting-x", "2026-10-23T10:02:00Z", "awaiting_approval")]
    for n in range(FILLERS):  # times out of the ids' order
        found.append(started(f"c-{n:02}", 5, f"2026-09-{1 + (n * 7) % 28:02}T{n % 24:02}:{n:02}:00Z"))
    return found


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A store on each backend: `lines()`, the demo and the Behalten tour; `conv-erased-x`
    erased; every chain verified, then the demo's event 8 changed by hand and a second `verify`
    storing the break; `conv-late-x` (owner 6) stored after, its chain unchecked."""
    folder = tmp_path_factory.mktemp(f"list-{request.param}")
    key = conversation_uuid("conv-demo-seo")
    old, new = b'"uid":42}', b'"uid":7}'
    schema = None
    if request.param == "sqlite":
        settings = {"CHATRECORD_DB": str(folder / "store.sqlite")}
    else:
        import psycopg
        from psycopg import sql

        url = request.getfixturevalue("postgres_url")
        schema = f"chatrecord_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        settings = {"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}
    run = runner(folder, **settings)
    for file in (write(folder / "lines.jsonl", lines()), DEMO, BEHALTEN):
        done = run("ingest", file)
        assert done.returncode == 0, done.stderr
    assert run("erase", "conv-erased-x", "--yes").returncode == 0
    assert run("verify").returncode == 0
    if schema is None:
        with sqlite3.connect(folder / "store.sqlite") as conn:
            where = "WHERE originator_id = ? AND originator_version = 8"
            (state,) = conn.execute(f"SELECT state FROM stored_events {where}", (key.hex,)).fetchone()
            conn.execute(f"UPDATE stored_events SET state = ? {where}", (bytes(state).replace(old, new, 1), key.hex))
    else:
        table = sql.Identifier(schema, "conversationstore_events")
        with psycopg.connect(url) as conn:
            where = sql.SQL("WHERE originator_id = %s AND originator_version = 8")
            row = conn.execute(sql.SQL("SELECT state FROM {} ").format(table) + where, (key,)).fetchone()
            assert row is not None
            conn.execute(sql.SQL("UPDATE {} SET state = %s ").format(table) + where, (bytes(row[0]).replace(old, new, 1), key))
    assert run("verify").returncode == 1
    late = [started("conv-late-x", 6, "2026-10-19T10:00:00Z"), message("conv-late-x", 1, "2026-10-19T10:01:00Z")]
    assert run("ingest", write(folder / "late.jsonl", late)).returncode == 0
    try:
        yield folder, settings
    finally:
        if schema is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="module")
def server(store: tuple[Path, dict[str, str]]) -> Iterator[str]:
    folder, settings = store
    process, url = start(settings, folder / "serve.log")
    try:
        yield url
    finally:
        stop(process)


def cli_list(store: tuple[Path, dict[str, str]], *args: str) -> tuple[list[str], str | None]:
    """Returns the ids `chatrecord list --json ARGS` prints and its next cursor."""
    done = runner(store[0], **store[1])("list", "--json", *args)
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    return [row["conversation"] for row in page["conversations"]], page["next_cursor"]


def api_list(server: str, params: list[tuple[str, str]]) -> tuple[list[str], str | None]:
    """Returns the ids `GET /v1/conversations` answers with `params` and its next cursor."""
    answer = httpx.get(f"{server}/v1/conversations", params=params, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    page = answer.json()
    return [row["conversation"] for row in page["conversations"]], page["next_cursor"]


def find(driver: Any, server: str, statuses: tuple[str, ...] = (), **fields: str) -> list[str]:
    """Opens the list, fills the form's `fields` (q, owner, since, until), ticks `statuses`,
    sends it and returns the ids listed."""
    driver.get(server + "/ui/")
    for name, value in fields.items():
        driver.find_element(By.NAME, name).send_keys(value)
    for status in statuses:
        driver.find_element(By.CSS_SELECTOR, f"input[name=status][value={status}]").click()
    old = driver.find_element(By.CSS_SELECTOR, "table.list")
    driver.find_element(By.CSS_SELECTOR, "form.search button[type=submit]").click()
    WebDriverWait(driver, 30).until(
        lambda d: d.current_url.startswith(server + "/ui/?") and old != d.find_element(By.CSS_SELECTOR, "table.list")
    )
    return listed(driver)


def column(driver: Any, name: str) -> list[str]:
    """The text of column `name` in each row of the list, in order."""
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "table.list thead th")]
    at = heads.index(name) + 1
    return [td.text for td in driver.find_elements(By.CSS_SELECTOR, f"table.list tbody td:nth-child({at})")]


def test_the_list_is_newest_activity_first_with_a_status_column_as_the_cli_and_the_api_give_it(
    browser: Any, server: str, store
) -> None:
    sign_in(browser, server, "/ui/")
    shown = listed(browser)
    last = column(browser, "last_at")
    status = dict(zip(shown, column(browser, "status"), strict=True))
    erased = dict(zip(shown, column(browser, "erased"), strict=True))
    screenshot(browser, f"list-{server.rsplit(':', 1)[1]}")

    assert shown[:7] == NEWEST and len(shown) == 50
    assert last == sorted(last, reverse=True) and last[0].startswith("2026-10-31T14:05:00")
    assert shown == cli_list(store)[0] == api_list(server, [])[0]
    assert {k: v for k, v in status.items() if v} == {
        "conv-demo-seo": "broken",
        "conv-waiting-x": "waiting",
        "conv-erased-x": "erased",
        "conv-undecided-x": "undecided",
        "conv-failed-x": "failed",
    }
    assert [k for k, v in erased.items() if v] == ["conv-erased-x"] and erased["conv-erased-x"] == "yes"


FILTERS: dict[str, tuple[dict[str, str], tuple[str, ...], list[str], list[tuple[str, str]], list[str]]] = {
    "part-of-id": ({"q": "UNDECIDED"}, (), ["--search", "UNDECIDED"], [("search", "UNDECIDED")], ["conv-undecided-x"]),
    "part-and-outcomes": (
        {"q": "x"},
        ("failed", "waiting"),
        ["--search", "x", "--status", "failed,waiting"],
        [("search", "x"), ("status", "failed"), ("status", "waiting")],
        ["conv-waiting-x", "conv-failed-x"],
    ),
    "owner": ({"owner": "3"}, (), ["--owner", "3"], [("owner", "3")], ["conv-undecided-x", "conv-failed-x"]),
    "time-range": (
        {"since": "2026-10-20T10:02:00Z", "until": "2026-10-23T00:00:00Z"},
        (),
        ["--since", "2026-10-20T10:02:00Z", "--until", "2026-10-23T00:00:00Z"],
        [("since", "2026-10-20T10:02:00Z"), ("until", "2026-10-23T00:00:00Z")],
        ["conv-erased-x", "conv-undecided-x", "conv-failed-x"],
    ),
    "failed": ({}, ("failed",), ["--status", "failed"], [("status", "failed")], ["conv-failed-x"]),
    "waiting": ({}, ("waiting",), ["--status", "waiting"], [("status", "waiting")], ["conv-waiting-x"]),
    "undecided": ({}, ("undecided",), ["--status", "undecided"], [("status", "undecided")], ["conv-undecided-x"]),
    "erased": ({}, ("erased",), ["--status", "erased"], [("status", "erased")], ["conv-erased-x"]),
    "broken": ({}, ("broken",), ["--status", "broken"], [("status", "broken")], ["conv-demo-seo"]),
    "unchecked": ({}, ("unchecked",), ["--status", "unchecked"], [("status", "unchecked")], ["conv-late-x"]),
    "verified": (
        {"owner": "7"},
        ("verified",),
        ["--owner", "7", "--status", "verified"],
        [("owner", "7"), ("status", "verified")],
        ["conv-behalten"],
    ),
}
"""Per name: the form's fields and ticked statuses, the same filters for `list` and for `GET
/v1/conversations`, and the ids listed."""


def test_each_filter_of_the_form_lists_what_the_cli_and_the_api_list(browser: Any, server: str, store) -> None:
    sign_in(browser, server, "/ui/")
    found = {}
    for name, (fields, statuses, cli, api, _) in FILTERS.items():
        shown = find(browser, server, statuses, **fields)
        kept = {field: browser.find_element(By.NAME, field).get_attribute("value") for field in fields}
        boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=status]")
        ticked = tuple(box.get_attribute("value") for box in boxes if box.is_selected())
        found[name] = (shown, cli_list(store, *cli)[0], api_list(server, api)[0], kept == fields and ticked == statuses)
        assert browser.execute_script("return document.scripts.length") == 0

    assert {name: got[0] for name, got in found.items()} == {name: case[-1] for name, case in FILTERS.items()}
    assert all(shown == cli == api for shown, cli, api, _ in found.values())
    assert all(kept for *_, kept in found.values())  # the form keeps what was asked


def test_the_next_page_keeps_the_search_and_lists_the_rest_as_the_cli_and_the_api_page(browser: Any, server: str, store) -> None:
    sign_in(browser, server, "/ui/")
    first = find(browser, server, q="c-")
    more = browser.find_element(By.CSS_SELECTOR, "a.more")
    link = more.get_attribute("href")
    here = browser.current_url
    more.click()
    WebDriverWait(browser, 30).until(lambda d: d.current_url != here)
    second = listed(browser)
    last = column(browser, "last_at")
    after = browser.find_elements(By.CSS_SELECTOR, "a.more")

    cli_first, cursor = cli_list(store, "--search", "c-")
    api_first, api_cursor = api_list(server, [("search", "c-")])
    assert cursor is not None and api_cursor is not None
    assert len(first) == 50 and len(second) == 2 and after == []
    assert sorted(first + second) == [f"c-{n:02}" for n in range(FILLERS)]
    assert first == cli_first == api_first
    assert (
        second
        == cli_list(store, "--search", "c-", "--cursor", cursor)[0]
        == api_list(server, [("search", "c-"), ("cursor", api_cursor)])[0]
    )
    assert "q=c-" in link and "after=" in link and last == sorted(last, reverse=True)
