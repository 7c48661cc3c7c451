"""Finding a conversation on the served list page in a real browser (headless Chromium): the
form's fields (a part of the id, owner, status checkboxes) are sent as GET parameters, with no
script, and the list shows what `chatrecord list` shows with those filters (issue 39, item 3)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import screenshot
from tests.browser.test_timeline_page import sign_in


def listed(driver: Any) -> list[str]:
    """The conversation ids the list's rows link to, in order."""
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "table.list tbody td:first-child a")]


def submit(driver: Any, served: str) -> None:
    old = driver.find_element(By.CSS_SELECTOR, "table.list")
    driver.find_element(By.CSS_SELECTOR, "form.search button[type=submit]").click()
    WebDriverWait(driver, 30).until(
        lambda d: d.current_url.startswith(served + "/ui/?") and old != d.find_element(By.CSS_SELECTOR, "table.list")
    )


def test_the_lists_form_finds_by_part_of_the_id_owner_and_status(browser: Any, served: str) -> None:
    sign_in(browser, served, "/ui/")
    everything = listed(browser)
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table.list thead th")]

    browser.find_element(By.NAME, "q").send_keys("HOSTILE")
    submit(browser, served)
    part = listed(browser)
    part_url = browser.current_url

    query = browser.find_element(By.NAME, "q")
    query.clear()
    browser.find_element(By.NAME, "owner").send_keys("7")
    browser.find_element(By.CSS_SELECTOR, "input[name=status][value=failed]").click()
    submit(browser, served)
    failed = listed(browser)
    failed_text = browser.find_element(By.CSS_SELECTOR, "table.list tbody").text
    checked = browser.find_element(By.CSS_SELECTOR, "input[name=status][value=failed]").is_selected()
    screenshot(browser, "list-filtered")

    assert set(everything) == {"conv-demo-seo", "conv-hostile"}
    assert header[:3] == ["conversation", "kind", "owner"] and header[-1] == "status"
    assert part == ["conv-hostile"] and "q=HOSTILE" in part_url
    assert failed == [] and "No conversation matches." in failed_text and checked
    assert "owner=7" in browser.current_url and "status=failed" in browser.current_url
    assert browser.execute_script("return document.scripts.length") == 0
