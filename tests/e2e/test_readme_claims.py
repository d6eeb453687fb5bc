"""The docs say what the product does: the README and the pages under docs/ — the command table
(docs/guide/commands.md), /start, and the answers they quote for buttons and prompts. Each claim that
once drifted is checked against the running bot or the locale the bot speaks from, so a change to
either side fails here until the other follows."""

from __future__ import annotations

import re
from pathlib import Path

from agentgram.runtime.infra.i18n import Translator
from tests.e2e.harness import running_bot
from tests.e2e.test_approvals import shell, toast, wait_decided, wait_prompt

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
COMMANDS_PAGE = (ROOT / "docs" / "guide" / "commands.md").read_text()
DOCS = [README, *(page.read_text() for page in sorted((ROOT / "docs").rglob("*.md")))]
PROSE = " ".join(" ".join(DOCS).split())  # quotes may wrap across lines


def readme_commands() -> set[str]:
    """The commands the docs' Commands table lists (docs/guide/commands.md)."""
    table = COMMANDS_PAGE.split("## Commands", 1)[1].split("\n## ", 1)[0]
    return {m for row in table.splitlines() if row.startswith("| `/") for m in re.findall(r"`/(\w+)", row)}


def test_readme_quotes_the_answers_the_bot_gives() -> None:
    en = Translator()
    quoted = {
        "approval-stale": "This request is no longer pending",
        "approval-not-yours": "This button isn't for you.",
        "not-allowed": "This is a private bot. Your Telegram user id is",
    }
    for key, claim in quoted.items():
        assert claim in PROSE, f"the docs no longer quote {key}"
        assert claim in en.t("en", key, id=1), f"{key} no longer says what the docs quote"
    assert "Approval timed out." in PROSE


async def test_start_and_help_list_every_command_the_readme_lists(tmp_path: Path) -> None:
    # the web view on: /trace is listed only then (the table says so: "when web.public_url is set")
    web = {"enabled": True, "token": "t" * 32, "public_url": "https://agent.example.org"}
    async with running_bot(tmp_path, web=web) as rig:
        rig.say("/start")
        start = await rig.wait_text("agentgram")
        rig.say("/help")
        await rig.tg.wait_for(lambda: len(rig.chat()) >= 2)
        help_text = rig.chat()[-1].visible_text
    for command in readme_commands():
        assert f"/{command}" in start.visible_text, f"/start does not list /{command}"
        assert f"/{command}" in help_text, f"/help does not list /{command}"


async def test_a_stale_tap_and_a_strangers_tap_get_the_answers_the_readme_quotes(tmp_path: Path) -> None:
    from tests.conftest import ALLOWED_USER, STRANGER

    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi"))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        approve = prompt.button_data("✅ Approve")
        rig.tg.add_chat(STRANGER)
        rig.tg.press_button(STRANGER, prompt.message_id, approve, chat_id=ALLOWED_USER)
        assert await toast(rig) == "This button isn't for you."
        rig.say("/stop")
        await wait_decided(rig, prompt, "⏹ Cancelled")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)
        assert await toast(rig, 2) == "This request is no longer pending."
