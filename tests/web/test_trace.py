"""Telegram ``/trace``: a link to the chat's current session in the web view, or why there is none."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import running_bot
from tests.web.harness import TOKEN

WEB = {"enabled": True, "token": TOKEN, "public_url": "https://agent.example.org/"}


async def test_trace_links_to_the_current_session(tmp_path: Path) -> None:
    async with running_bot(tmp_path, web=WEB) as rig:
        rig.say("/new")
        await rig.tg.wait_for(lambda: len(rig.chat()) == 1)
        rig.say("/trace")
        reply = await rig.wait_text("web view")
        assert "https://agent.example.org/sessions/2" in (reply.text or "")
        assert TOKEN not in (reply.text or ""), "a link in a chat is easily forwarded: no token in it"


async def test_trace_says_the_web_view_is_off(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/trace")
        await rig.wait_text("The web view is off.")
