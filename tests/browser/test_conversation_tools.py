"""Working inside one conversation in a real browser (headless Chromium), on a served SQLite
store and a served PostgreSQL one: the jump box, the turns on a page, the overview's marks,
the events as stored, the rule sets compared, two turns compared and the links to the audit,
export, trace and verify; and the jump links of a `timeline -o` file (issue 39 items 4 and 5)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import screenshot
from tests.browser.test_timeline_page import sign_in
from tests.e2e.conftest import DEMO, runner
from tests.http.conftest import start, stop
from tests.http.test_ui_tools import BEHALTEN, long_lines


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A store on each backend holding the demo, the Behalten tour and a chat of 25 turns."""
    folder = tmp_path_factory.mktemp(f"tools-{request.param}")
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
    long = folder / "long.jsonl"
    long.write_text("".join(json.dumps(line) + "\n" for line in long_lines("conv-long", 25)), encoding="utf-8")
    run = runner(folder, **settings)
    for file in (DEMO, BEHALTEN, long):
        done = run("ingest", file)
        assert done.returncode == 0, done.stderr
    try:
        yield folder, settings
    finally:
        if schema is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="module")
def server(backend: tuple[Path, dict[str, str]]) -> Iterator[str]:
    folder, settings = backend
    process, url = start(settings, folder / "serve.log")
    try:
        yield url
    finally:
        stop(process)


def loaded(driver: Any, start: str) -> None:
    """Waits until the browser left the page at URL `start`."""
    WebDriverWait(driver, 30).until(lambda d: d.current_url != start)


def submit(driver: Any, form: str, **fields: str) -> None:
    here = driver.current_url
    for name, value in fields.items():
        box = driver.find_element(By.CSS_SELECTOR, f"{form} input[name={name}]")
        box.clear()
        box.send_keys(value)
    driver.find_element(By.CSS_SELECTOR, f"{form} button[type=submit]").click()
    loaded(driver, here)


def click(driver: Any, css: str) -> None:
    here = driver.current_url
    driver.find_element(By.CSS_SELECTOR, css).click()
    loaded(driver, here)


def body_text(driver: Any) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def test_the_jump_box_finds_an_older_turn_a_segment_and_an_event(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-long")
    first_page = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")]

    submit(browser, "form.jump", jump="message 2")
    at_message = browser.current_url
    target = browser.execute_script("return document.querySelector(':target') && document.querySelector(':target').id")
    turns = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")]

    submit(browser, "form.jump", jump="conv-long-run-3/1")
    at_segment = browser.current_url
    segment = browser.find_element(By.ID, "e-7").text

    assert first_page[0] == "User message 25" and len(first_page) == 20 and "User message 2" not in first_page
    assert at_message.endswith("/ui/conversations/conv-long?before=6#message-2") and target == "message-2"
    assert turns == ["User message 2", "User message 1", "Start"]
    assert at_segment.endswith("?before=8#e-7") and "segment conv-lon…/1" in segment and "Antwort 3" in segment
    assert "call times: get_page 12 ms" in segment and "usage: 912 ms" in segment


def test_the_turns_on_a_page_and_the_overviews_marks_link_with_titles_that_show(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    links = [a.text for a in browser.find_elements(By.CSS_SELECTOR, ".turns-here a")]
    marks = browser.find_elements(By.CSS_SELECTOR, "svg.overview a.mark")
    titles = [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, "svg.overview a.mark title")]
    answers = [p.text for p in browser.find_elements(By.CSS_SELECTOR, ".row .answer.text")]
    screenshot(browser, f"conversation-tools-{server.rsplit(':', 1)[1]}")

    segment_mark = next(m for m in marks if m.find_element(By.TAG_NAME, "rect").get_attribute("y") == "30")
    here = browser.current_url
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", segment_mark)
    loaded(browser, here)

    assert links == ["3", "1"]
    assert browser.find_elements(By.CSS_SELECTOR, "img.overview") == [] and len(marks) == 16
    assert all(titles) and any(t.startswith("segment") for t in titles)
    assert answers[0] == "ASSISTANT Womit sollen wir beginnen?" and len(answers) == 8
    assert browser.current_url.endswith("/ui/conversations/conv-demo-seo#e-4")  # on the newest page
    assert browser.execute_script("return document.querySelector(':target').id") == "e-4"
    assert browser.execute_script("return document.scripts.length") == 0


def test_the_events_as_stored_link_each_hash_to_the_one_before(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    click(browser, "#e-4 a.raw")
    shown = browser.execute_script("return document.querySelector(':target').id")
    hashes = [c.text for c in browser.find_elements(By.CSS_SELECTOR, ".raw-event code.hash")]
    previous = [c.text for c in browser.find_elements(By.CSS_SELECTOR, ".raw-event code.previous")]
    states = [p.text for p in browser.find_elements(By.CSS_SELECTOR, ".raw-event pre.state")]

    click(browser, "#raw-4 a.see")

    assert shown == "raw-4" and len(hashes) == 20 and previous[0] == "0" * 64 and previous[1:] == hashes[:-1]
    assert '"aesgcm"' in states[2] and "SEO optimieren" not in " ".join(states)  # sealed as stored
    assert browser.current_url.endswith("#e-4")


def test_the_rule_sets_and_two_turns_compared_from_the_page(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    click(browser, "#link-rules")
    rows = [r.get_attribute("class") or "" for r in browser.find_elements(By.CSS_SELECTOR, "tr.turn-diff")]
    dropped = len(browser.find_elements(By.CSS_SELECTOR, "#diff-1 td.dropped li"))
    screenshot(browser, f"rules-diff-{server.rsplit(':', 1)[1]}")
    click(browser, "nav.rules a.rule")
    other = browser.find_element(By.CSS_SELECTOR, "nav.rules .rule.current").text

    browser.get(server + "/ui/conversations/conv-demo-seo")
    submit(browser, "form.compare-form", first="1", second="3")
    notes = browser.find_element(By.ID, "notes-count").text
    messages = browser.find_element(By.ID, "messages-count").text

    assert rows == ["turn-diff same", "turn-diff"] and dropped == 14
    assert other == "2026-11-01"
    assert notes == "14 added, 0 moved, 0 dropped." and messages == "1 message kept, 4 appended."


def test_the_links_to_the_audit_export_trace_and_verify_answer_the_signed_in_browser(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    found = {}
    for name in ("audit", "export", "trace", "verify"):
        browser.get(server + "/ui/conversations/conv-demo-seo")
        click(browser, f"#link-{name}")
        found[name] = body_text(browser)

    audit = json.loads(found["audit"])
    export = [json.loads(line) for line in found["export"].splitlines()]
    trace = json.loads(found["trace"])
    assert sum(row["kind"] == "segment" for row in audit) == 8 and all(row["verified"] for row in audit)
    assert len(export) == len(DEMO.read_text(encoding="utf-8").splitlines()) and export[0]["type"] == "conversation_started"
    assert trace["resourceSpans"] and "Womit sollen wir" not in found["trace"]
    assert found["verify"].startswith("✔ Chain verified: 20 events") and "was recomputed now." in found["verify"]


def test_the_files_turn_links_and_overview_marks_jump_within_it(browser: Any, backend: tuple[Path, dict[str, str]]) -> None:
    folder, settings = backend
    page = folder / "demo.html"
    done = runner(folder, **settings)("timeline", "conv-demo-seo", "-o", str(page))
    assert done.returncode == 0, done.stderr
    browser.get(page.as_uri())

    browser.find_element(By.CSS_SELECTOR, ".turns-here a[href='#message-1']").click()
    at_turn = browser.execute_script("return document.querySelector(':target').id")
    mark = browser.find_element(By.CSS_SELECTOR, "svg.overview a.mark[href='#e-4']")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", mark)
    at_mark = browser.execute_script("return document.querySelector(':target').id")

    assert at_turn == "message-1" and at_mark == "e-4"
    assert browser.find_elements(By.CSS_SELECTOR, "form.jump") == []  # no server: no form
    assert "chatrecord verify conv-demo-seo" in browser.find_element(By.ID, "tools").text


def test_each_segment_shows_its_duration_call_times_tokens_and_cost(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    segments = browser.find_elements(By.CSS_SELECTOR, "li.row.segment")
    usage = [s.find_element(By.CSS_SELECTOR, "p.usage").text for s in segments]
    times = [s.find_element(By.CSS_SELECTOR, "p.times").text for s in segments]
    calls = [s.find_element(By.CSS_SELECTOR, "p.calls").text for s in segments]

    one = "1 model call, 1,800 in / 120 out tokens, cost 0.0041"
    assert usage == [
        "usage: 4,345 ms, 2 model calls, 3,600 in / 240 out tokens, cost 0.0082",
        f"usage: 2,213 ms, {one}",
        f"usage: 2,288 ms, {one}",
        f"usage: 2,328 ms, {one}",
        f"usage: 2,368 ms, {one}",
        f"usage: 2,408 ms, {one}",
        f"usage: 2,448 ms, {one}",
        "usage: 4,958 ms, 2 model calls, 3,600 in / 240 out tokens, cost 0.0082",
    ]
    assert times[0] == "call times: get_page 32 ms · chat_set_progress 2 ms"
    assert times[2] == "call times: update_page_metadata 38 ms · chat_set_progress 2 ms"
    assert all(c.startswith("tool calls: ") for c in calls) and len(calls) == 8


def test_the_chain_verdict_is_whole_in_the_page_and_an_old_turns_input_opens(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-demo-seo")
    chain = browser.find_element(By.ID, "chain-state")
    height, whole = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.height, arguments[0].scrollHeight];", chain
    )
    frames = browser.find_elements(By.TAG_NAME, "iframe")
    verdict, shown = chain.text, chain.is_displayed()
    click(browser, "#t-3 a.see")  # the first turn's model input (`?turn=1`), read up to that turn
    panels = [p for p in browser.find_elements(By.CSS_SELECTOR, "section.input") if p.is_displayed()]
    texts = [p.get_attribute("textContent") for p in panels[0].find_elements(By.CSS_SELECTOR, ".msg .text:not(.was)")]

    assert shown and frames == []
    # recomputed now, or from the position another test's `timeline -o` stored: every event either way
    assert verdict.startswith("✔ Chain verified") and "20 events, head " in verdict and "✘" not in verdict
    assert height >= whole - 1 > 0  # the whole verdict is laid out, none cut off (scrollHeight rounds up)
    assert "turn=1" in browser.current_url and len(panels) == 1
    assert texts == ["The selected page is page 42.", "SEO optimieren"]


def test_the_chats_labels_are_quoted_and_each_decline_sits_on_the_segment_of_its_card(browser: Any, server: str) -> None:
    sign_in(browser, server, "/ui/conversations/conv-behalten")
    quoted = browser.find_elements(By.CSS_SELECTOR, "main q")
    waiting = {v: browser.find_element(By.CSS_SELECTOR, f"#e-{v} p.waiting").text for v in (4, 6, 8)}
    segments = {v: browser.find_element(By.CSS_SELECTOR, f"#e-{v} p.head code").get_attribute("title") for v in (4, 6, 8)}
    decided = {v: browser.find_element(By.CSS_SELECTOR, f"#e-{v} p.head code").text for v in (5, 7, 9)}
    places = [p.text for p in browser.find_elements(By.CSS_SELECTOR, "#next-call li.note .place")]
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")]
    body = body_text(browser)
    screenshot(browser, f"behalten-{server.rsplit(':', 1)[1]}")

    run = "7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01"
    assert browser.execute_script("return document.documentElement.lang") == "en"
    assert quoted and {q.get_attribute("lang") for q in quoted} == {"de"}  # the chat's own words, quoted as German
    assert {q.text for q in quoted if "act" in (q.get_attribute("class") or "")} == {
        "chat_set_progress ausgeführt",
        "Von dir abgelehnt: Behalten",
    }
    assert waiting == {
        4: "waiting: update_page_metadata on pages:42 (title) → the chat shows Von dir abgelehnt: Behalten",
        6: "waiting: update_page_metadata on pages:42 (og_title) → the chat shows Von dir abgelehnt: Behalten",
        8: "waiting: update_page_metadata on pages:42 (og_description) → the chat shows Von dir abgelehnt: Behalten",
    }
    assert segments == {4: f"{run}/1", 6: f"{run}/2", 8: f"{run}/3"}
    assert decided == {5: "7c1d0b5e…/1", 7: "7c1d0b5e…/2", 9: "7c1d0b5e…/3"}  # each decision on its own card
    assert places == ["into message 2 (assistant)"] + [f"into message {n} (assistant)" for n in (4, 4, 6, 6, 8, 8)]
    assert headings == ["User message 5", "User message 1", "Start"] and "message #" not in body and "message 0" not in body
    assert "awaiting approval" in body and "approval after the card declined" in body and "ausgeführt" in body
