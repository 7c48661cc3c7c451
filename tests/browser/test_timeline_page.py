"""The timeline page in a real browser (headless Chromium): the demo's latest turn, time travel
to an earlier turn, another rule set, hostile texts, and the exported file offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import (
    HOSTILE_CONVERSATION,
    TOKEN,
    replay_at,
    requests_made,
    screenshot,
)
from tests.e2e.conftest import DEMO, runner


def sign_in(driver: Any, url: str, path: str) -> None:
    """Opens `path`, which sends the browser to the sign-in form, and signs in with the token."""
    driver.get(url + path)
    assert "/ui/login" in driver.current_url
    driver.find_element(By.NAME, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    # the click returns before the form's POST and its redirect have loaded: wait for the page
    # (a test that read the URL at once saw the sign-in form's now and then)
    WebDriverWait(driver, 30).until(lambda d: d.current_url.startswith(url + path.split("#")[0]))


def shown_panel(driver: Any) -> Any:
    """Returns the one model input panel on view."""
    panels = [p for p in driver.find_elements(By.CSS_SELECTOR, "section.input") if p.is_displayed()]
    assert len(panels) == 1
    return panels[0]


def sent(panel: Any) -> tuple[int, int]:
    """Returns (messages, notes) the panel shows as sent."""
    return (len(panel.find_elements(By.CSS_SELECTOR, ".msg")), len(panel.find_elements(By.CSS_SELECTOR, ".msg li.note")))


def texts_of(panel: Any) -> list[str]:
    """Returns the text pieces of each message the panel shows (notes excluded), in order."""
    return [p.get_attribute("textContent") for p in panel.find_elements(By.CSS_SELECTOR, ".msg .text:not(.was)")]


def expected_texts(turn: dict[str, Any]) -> list[str]:
    """Returns replay's message contents with the notes taken out, cut as the page cuts them."""
    pieces = []
    for message in turn["messages"]:
        content = message["content"]
        for note in turn["notes"]:
            content = content.replace(note, "\0")
        pieces.extend(p.strip("\n") for p in content.split("\0") if p.strip())
    return pieces


def follow(driver: Any, css: str, text: str | None = None) -> None:
    links = [a for a in driver.find_elements(By.CSS_SELECTOR, css) if a.is_displayed() and (text is None or a.text == text)]
    assert links, f"no link {css} {text or ''}"
    links[0].click()


def no_script_ran(driver: Any) -> None:
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    assert driver.find_elements(By.CSS_SELECTOR, "main script, main img[src=x]") == []


def test_the_demo_page_shows_the_notes_the_latest_turn_turn_1_and_transcript_only(browser: Any, served: str, stored) -> None:
    sign_in(browser, served, "/ui/conversations/conv-demo-seo")

    next_call = browser.find_element(By.ID, "next-call")  # on open: the next call's notes, as the chat reads them
    assert len(next_call.find_elements(By.CSS_SELECTOR, "li.note")) == 14
    chain = browser.find_element(By.ID, "chain-state")  # in the page itself, whole: no frame to clip it
    assert browser.find_elements(By.TAG_NAME, "iframe") == []
    assert chain.is_displayed() and chain.text.startswith("✔ Chain verified")
    assert chain.text.endswith("was recomputed now.") or "Recompute every hash" in chain.text
    shown = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.height, arguments[0].scrollHeight];", chain
    )
    assert shown[0] >= shown[1] - 1 > 0  # the whole verdict is laid out, none cut off (scrollHeight rounds up)
    assert [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")] == ["User message 3", "User message 1", "Start"]
    screenshot(browser, "demo-page")

    follow(browser, "#next-call a.see")  # the latest turn, user message 3, as replay --at 3 gives it
    latest = shown_panel(browser)
    assert sent(latest) == (6, 14)
    assert texts_of(latest) == expected_texts(replay_at(stored, "conv-demo-seo", 3))
    screenshot(browser, "demo-latest-turn")

    follow(browser, "#t-3 a.see")  # the first turn, user message 1 (event 3)
    first = shown_panel(browser)
    assert sent(first) == (2, 0)
    assert (
        texts_of(first)
        == expected_texts(replay_at(stored, "conv-demo-seo", 1))
        == ["The selected page is page 42.", "SEO optimieren"]
    )
    screenshot(browser, "demo-turn-1")

    follow(browser, ".turn a.see")  # back to turn 2, user message 3, as replay --at 3 gives it
    assert sent(shown_panel(browser)) == (6, 14)
    follow(browser, "section.input a.rule", "transcript-only")
    other = shown_panel(browser)
    assert sent(other) == (6, 0)
    assert texts_of(other) == expected_texts(replay_at(stored, "conv-demo-seo", 3, "transcript-only"))
    assert len(other.find_elements(By.CSS_SELECTOR, ".notes.removed li.note del")) == 14
    assert "14 not sent" in other.find_element(By.CSS_SELECTOR, ".compare").text
    screenshot(browser, "demo-transcript-only")


def test_hostile_texts_render_as_inert_text(browser: Any, served: str) -> None:
    sign_in(browser, served, "/ui/conversations/" + quote(HOSTILE_CONVERSATION))

    no_script_ran(browser)
    user = browser.find_elements(By.CSS_SELECTOR, ".turn .user.text")[-1]  # oldest turn last
    shown = user.get_attribute("textContent")
    assert '<script>window.__pwned = "script"</script>' in shown and "onerror=" in shown
    assert "\\u202eevil\\u202c" in shown and "\u202e" not in shown  # the bidi controls shown, not obeyed
    assert user.find_elements(By.XPATH, "ancestor::*[contains(@class, 'notes')]") == []  # the user's, as written
    follow(browser, ".turn a.see")  # the latest turn
    panel = shown_panel(browser)
    assert sent(panel) == (4, 1)  # system, user 1, the answer, user 2; the one note is the chat's own
    assert all("all saved" not in n.text for n in panel.find_elements(By.CSS_SELECTOR, "li.note"))
    sent_texts = " ".join(texts_of(panel))
    assert "(Chat record — written by the chat" in sent_texts and "[Chat record" not in sent_texts  # as sent: disarmed
    screenshot(browser, "hostile")


def test_the_exported_file_shows_the_same_offline_and_requests_nothing(browser: Any, stored, tmp_path: Path) -> None:
    folder, settings = stored
    run = runner(folder, **settings)
    for conversation, name in (("conv-demo-seo", "demo.html"), (HOSTILE_CONVERSATION, "hostile.html")):
        done = run("timeline", conversation, "-o", tmp_path / name)
        assert done.returncode == 0, done.stderr
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd(
        "Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0}
    )
    requests_made(browser)  # drop what came before

    page = (tmp_path / "demo.html").as_uri()
    browser.get(page)
    assert sent(shown_panel(browser)) == (6, 14)
    assert browser.find_element(By.ID, "chain-state").text.startswith("✔ Chain verified: 20 events")
    follow(browser, "#t-3 a.see")
    assert sent(shown_panel(browser)) == (2, 0)
    follow(browser, ".turn a.see")
    follow(browser, "section.input a.rule", "transcript-only")
    assert sent(shown_panel(browser)) == (6, 0)
    screenshot(browser, "exported-transcript-only")
    browser.get((tmp_path / "hostile.html").as_uri())
    no_script_ran(browser)

    assert [u for u in requests_made(browser) if not u.startswith("file://")] == []
    assert {u.split("#")[0] for u in requests_made(browser)} <= {page, (tmp_path / "hostile.html").as_uri()}


def test_a_break_verify_found_is_shown_whole_on_the_first_load(browser: Any, tmp_path: Path) -> None:
    """The issue's log: verify ok, event 8 changed by hand, verify broken; the page said "✔ Chain
    verified" on first load (from the position the first verify stored), the break only behind
    a link in a frame 3rem high."""
    import re
    import sqlite3

    from tests.e2e.test_cli_chain import DEMO_ID
    from tests.http.conftest import start, stop

    settings = {"CHATRECORD_DB": str(tmp_path / "store.sqlite")}
    run = runner(tmp_path, **settings)
    assert run("ingest", DEMO).returncode == 0 and run("verify").returncode == 0
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
            "WHERE originator_id = ? AND originator_version = 8",
            (DEMO_ID,),
        )
    assert run("verify").returncode == 1
    process, url = start(settings, tmp_path / "serve.log")
    try:
        sign_in(browser, url, "/ui/conversations/conv-demo-seo")
        chain = browser.find_element(By.ID, "chain-state")
        body = browser.find_element(By.TAG_NAME, "main").text
        height, whole = browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.height, arguments[0].scrollHeight];", chain
        )
        screenshot(browser, "tampered-page")
    finally:
        stop(process)

    assert chain.is_displayed() and browser.find_elements(By.TAG_NAME, "iframe") == []
    assert chain.text.startswith("✘ Chain broken at event 8 (changed): the event's stored bytes were changed")
    assert "Found by chatrecord verify at " in chain.text and height >= whole - 1 > 0  # scrollHeight rounds up
    assert re.search(r"\bverified\b", body) is None
    assert "untrusted: the chain breaks at event 8" in body
