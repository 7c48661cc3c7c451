"""Signing in and out of the served page in a real browser (headless Chromium): the header's
"Sign out" ends the session, and the page asks for the token again (issue 35, item 7)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.test_timeline_page import sign_in

PAGE = "/ui/conversations/conv-demo-seo"


def test_the_sign_out_button_ends_the_session(browser: Any, served: str) -> None:
    sign_in(browser, served, PAGE)
    cookie = browser.get_cookie("chatrecord_ui")
    button = browser.find_element(By.CSS_SELECTOR, "header form.signout button")
    assert button.text == "Sign out" and cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    button.click()
    WebDriverWait(browser, 30).until(lambda d: "Signed out." in d.page_source)
    gone = browser.get_cookie("chatrecord_ui")
    browser.get(served + PAGE)

    assert gone is None
    assert browser.current_url == served + "/ui/login?next=%2Fui%2Fconversations%2Fconv-demo-seo"
    browser.add_cookie({"name": "chatrecord_ui", "value": cookie["value"], "path": "/ui"})  # a copy kept of the old one
    browser.get(served + PAGE)
    assert "/ui/login" in browser.current_url
