"""A conversation of 10,000 segments opens in a real browser (issue 39, item 5): the served page
shows its newest 20 turns, links to the older ones, and costs what it shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.browser.conftest import screenshot
from tests.browser.test_timeline_page import sign_in
from tests.e2e.conftest import runner
from tests.http.conftest import start, stop
from tests.http.test_ui_tools import long_lines

LONG = "conv-10k"
SEGMENTS = 10_000


@pytest.fixture(scope="module")
def long_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `chatrecord serve` on a SQLite store holding one conversation of 10,000 segments."""
    folder: Path = tmp_path_factory.mktemp("long-store")
    settings = {"CHATRECORD_DB": str(folder / "store.sqlite")}
    file = folder / "long.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in long_lines(LONG, SEGMENTS)), encoding="utf-8")
    done = runner(folder, **settings)("ingest", file)
    assert done.returncode == 0, done.stderr
    assert "20001 events appended" in done.stdout
    process, url = start(settings, folder / "serve.log")
    try:
        yield url
    finally:
        stop(process)


def test_a_conversation_of_10000_segments_opens_with_its_newest_turns_and_a_way_to_the_older(
    browser: Any, long_served: str
) -> None:
    sign_in(browser, long_served, f"/ui/conversations/{LONG}")
    turns = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")]
    size = len(browser.page_source.encode("utf-8"))
    answers = [p.text for p in browser.find_elements(By.CSS_SELECTOR, ".row .answer.text")]
    older = [
        a.get_attribute("href")
        for a in browser.find_elements(By.CSS_SELECTOR, "a")
        if "before=" in (a.get_attribute("href") or "")
    ]
    screenshot(browser, "conversation-10000-segments")

    assert turns == [f"User message {n}" for n in range(SEGMENTS, SEGMENTS - 20, -1)]
    assert answers == [f"ASSISTANT Antwort {n}" for n in range(SEGMENTS, SEGMENTS - 20, -1)]
    assert older, "no link to the older turns"
    assert size < 1_000_000  # the page costs what it shows, not the history

    browser.get(older[0])
    again = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".turn h3")]
    assert again and again[0] != turns[0] and all(t.startswith("User message ") for t in again)
    assert int(again[0].rsplit(" ", 1)[1]) < SEGMENTS - 19
