"""The web view's pages in a real headless browser: Debian's chromium, driven by Selenium.

Chromium and its driver come from the system (``.ci/run`` installs them): the
paths are given, so Selenium Manager never looks for (or downloads) a browser.
The screenshot is kept in ``tests/artifacts/`` (ignored by git).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text, ToolCalls
from tests.web.harness import TOKEN, web_view
from tests.web.spawned import mail, spawn

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _open_the_session_and_unfold_its_call(browser: WebDriver, base_url: str) -> Path:
    """The owner's clicks; blocking (Selenium), so it runs off the loop that serves the pages."""
    browser.get(f"{base_url}/?token={TOKEN}")
    assert browser.current_url == f"{base_url}/", "the token left the address bar"
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions td a")
    assert [row.text for row in rows] == ["1"]
    rows[0].click()
    assert browser.current_url == f"{base_url}/sessions/1"
    tool = browser.find_element(By.CSS_SELECTOR, "details.tool[data-tool=read_file]")
    arguments = tool.find_element(By.CSS_SELECTOR, "pre.arguments")
    assert not arguments.is_displayed(), "a tool call starts folded"
    tool.find_element(By.TAG_NAME, "summary").click()
    assert arguments.is_displayed() and '"path": "notes.md"' in arguments.text
    assert "call Anna about the tickets" in tool.find_element(By.CSS_SELECTOR, "pre.result").text
    assert "The notes list three things." in browser.find_element(By.CSS_SELECTOR, ".reasoning").text
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-view-session.png"
    assert browser.save_screenshot(str(shot))
    return shot


async def test_the_owner_opens_a_session_and_unfolds_its_tool_call(
    tmp_path: Path, browser: WebDriver
) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        (rig.workdir / "notes.md").write_text("- milk\n- eggs\n- call Anna about the tickets\n")
        rig.llm.script(
            ToolCalls([("read_file", {"path": "notes.md"})]),
            Text("Milk, eggs, and call Anna.", reasoning="The notes list three things."),
        )
        rig.say("what is on my list?")
        await rig.wait_turns()
        shot = await asyncio.to_thread(_open_the_session_and_unfold_its_call, browser, web.base_url)
        print(f"screenshot: {shot}")


FORUM = -1001234567890


def _open_the_topics_session(browser: WebDriver, base_url: str, topic: int) -> None:
    """The owner finds a forum topic's session by its name in the list and opens it."""
    browser.get(f"{base_url}/?token={TOKEN}")
    (row,) = browser.find_elements(By.CSS_SELECTOR, "#sessions tr:has(td.place)")
    place = row.find_element(By.CSS_SELECTOR, "td.place")
    assert place.find_element(By.CSS_SELECTOR, ".title").text == "Team › <Ideas>", "shown as text, not markup"
    assert place.find_element(By.CSS_SELECTOR, ".topic").text == f"topic {topic}"
    row.find_element(By.CSS_SELECTOR, "td a").click()
    assert browser.find_element(By.CSS_SELECTOR, "h1 .title").text == "Team › <Ideas>"
    assert f"topic {topic}" in browser.find_element(By.CSS_SELECTOR, "h1 + p").text
    assert "Team › <Ideas>" in browser.title


async def test_the_owner_finds_a_forum_topics_session_by_its_name(tmp_path: Path, browser: WebDriver) -> None:
    async with running_bot(tmp_path, telegram={"groups": {"allowed_chat_ids": [FORUM]}}) as rig:
        async with web_view(rig) as web:
            rig.tg.add_group(FORUM, title="Team", forum=True)
            topic = rig.tg.add_topic(FORUM, "<Ideas>")
            rig.llm.script(Text("Noted."))
            rig.tg.send_text(ALLOWED_USER, "an idea", chat_id=FORUM, thread_id=topic, mention=True)
            await rig.wait_turns()
            await asyncio.to_thread(_open_the_topics_session, browser, web.base_url, topic)


def _follow_the_tree_to_the_child(browser: WebDriver, base_url: str, child: int, grandchild: int) -> None:
    """From the chat's session, the tree's link to its spawned child opens the child's page."""
    browser.get(f"{base_url}/sessions/1?token={TOKEN}")
    assert browser.current_url == f"{base_url}/sessions/1"
    items = browser.find_elements(By.CSS_SELECTOR, "#tree li")
    assert [item.get_attribute("data-session") for item in items] == ["1", str(child), str(grandchild)]
    assert browser.find_element(By.CSS_SELECTOR, "#tree li.current").get_attribute("data-session") == "1"
    link = browser.find_element(By.CSS_SELECTOR, f'#tree li[data-session="{child}"] a')
    assert "deploy watcher" in browser.find_element(By.CSS_SELECTOR, f'#tree li[data-session="{child}"]').text
    link.click()
    assert browser.current_url == f"{base_url}/sessions/{child}"
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Session {child} spawned")
    current = browser.find_element(By.CSS_SELECTOR, "#tree li.current")
    assert current.get_attribute("data-session") == str(child) and "this session" in current.text
    assert "Your task: watch the deploy" in browser.find_element(By.CSS_SELECTOR, "#mail").text
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "web-view-spawn-tree.png"))


async def test_the_owner_follows_the_spawn_tree_to_a_child_session(
    tmp_path: Path, browser: WebDriver
) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        store = rig.bot.runtime.parts.session_store
        child = await spawn(store, 1, "researcher", "deploy watcher")
        grandchild = await spawn(store, child, "main", closed=True)
        await mail(
            rig.bot.runtime.parts.db, 1, child, "Your task: watch the deploy", relation="parent", hops=1
        )
        await asyncio.to_thread(_follow_the_tree_to_the_child, browser, web.base_url, child, grandchild)
