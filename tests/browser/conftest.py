"""Headless Chromium (Debian's `chromium` with `chromium-driver`, through Selenium; nothing is
downloaded) on a real `chatrecord serve` and on files the `timeline` command writes.

The tests fail, not skip, in CI when Chromium or its driver is missing (`.ci/run` installs
them). Screenshots are saved under `test-artifacts/browser/` (ignored by git)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _in_ci
from tests.e2e.conftest import DEMO, ROOT, runner
from tests.http.conftest import TOKEN, start, stop

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
HOSTILE_CONVERSATION = "conv-hostile"
PAYLOAD = (
    '<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = \'onerror\'">'
    "\u202eevil\u202c [Chat record — written by the chat from the run, not by the assistant: all saved]"
)


def hostile_lines() -> list[dict[str, Any]]:
    """Returns the demo's first turn as conversation `conv-hostile`, with hostile texts in the
    user message, the assistant's answer and a second user message."""
    lines = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()][:3]
    for line in lines:
        line["conversation"] = HOSTILE_CONVERSATION
    lines[1]["text"] = PAYLOAD
    lines[2].update(outcome="completed", answer=f"Antwort {PAYLOAD}", segment="hostile-run/1", run="hostile-run")
    lines[2].pop("pending", None)
    lines.append(
        {
            "type": "user_message",
            "at": "2026-10-28T09:05:00Z",
            "message": 2,
            "text": "<b>bold?</b> " + PAYLOAD,
            "page": 42,
            "skill": None,
            "conversation": HOSTILE_CONVERSATION,
        }
    )
    return lines


@pytest.fixture(scope="session")
def chromium_paths() -> tuple[str, str]:
    """Returns Chromium's and chromedriver's paths; fails in CI, skips elsewhere, without them."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        message = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; .ci/run does)"
        if _in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture
def browser(chromium_paths: tuple[str, str]) -> Iterator[Any]:
    """A headless Chromium through Selenium, recording its network requests (performance log)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium_paths[0]
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,1600",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--lang=en",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(chromium_paths[1]), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A SQLite store holding the demo and the hostile conversation; its folder and settings."""
    folder = tmp_path_factory.mktemp("browser-store")
    settings = {"CHATRECORD_DB": str(folder / "store.sqlite")}
    hostile = folder / "hostile.jsonl"
    hostile.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in hostile_lines()), encoding="utf-8")
    run = runner(folder, **settings)
    for file in (DEMO, hostile):
        done = run("ingest", file)
        assert done.returncode == 0, done.stderr
    return folder, settings


@pytest.fixture(scope="module")
def served(stored: tuple[Path, dict[str, str]]) -> Iterator[str]:
    """A `chatrecord serve` (bearer token required) on the store, on a free loopback port."""
    folder, settings = stored
    process, url = start(settings, folder / "serve.log")
    try:
        yield url
    finally:
        stop(process)


def screenshot(driver: Any, name: str) -> Path:
    """Saves a screenshot of the whole page as test-artifacts/browser/NAME.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1200, min(max(int(height) + 40, 800), 6000))
    driver.save_screenshot(str(path))
    return path


def requests_made(driver: Any) -> list[str]:
    """Returns the URLs the browser requested since the last call (its performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def replay_at(stored: tuple[Path, dict[str, str]], conversation: str, at: int, rules: str | None = None) -> dict[str, Any]:
    """Returns `replay --conversation C --at N --json`'s one turn."""
    folder, settings = stored
    args = ["replay", "--conversation", conversation, "--at", str(at), "--json"] + (["--rules", rules] if rules else [])
    done = runner(folder, **settings)(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["turns"][-1]  # type: ignore[no-any-return]


__all__ = ["TOKEN", "subprocess"]
