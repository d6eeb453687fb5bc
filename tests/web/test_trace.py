"""Telegram ``/trace``: a link to the chat's current session in the web view, or why there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.infra.i18n import Translator
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


async def test_trace_says_the_web_view_runs_without_a_public_address(tmp_path: Path) -> None:
    """Regression (issue 25): with the web view on and no ``web.public_url``, /trace said "off"."""
    async with running_bot(tmp_path, web={"enabled": True, "token": TOKEN}) as rig:
        rig.say("/trace")
        reply = await rig.wait_text("no public address")
        text = reply.text or ""
        assert "The web view is on" in text and "web.public_url" in text
        assert "off" not in text


async def test_help_lists_trace_only_while_the_web_view_is_enabled(tmp_path: Path) -> None:
    """Regression (issue 25): /help offered /trace with the web view disabled."""
    async with running_bot(tmp_path) as rig:
        rig.say("/help")
        reply = await rig.wait_text("/compact")
        assert "/trace" not in (reply.text or "")
        assert "\n\n" in (reply.text or "").split("/compact", 1)[1][:60], (
            "the list still ends in one blank line"
        )
    async with running_bot(tmp_path / "on", web=WEB) as rig:
        rig.say("/help")
        reply = await rig.wait_text("/compact")
        assert "/compact — summarise older messages now\n/trace — this conversation in the web view\n\n" in (
            reply.text or ""
        )


@pytest.mark.parametrize("lang", Translator().languages())
def test_every_locale_words_the_web_view_states(lang: str) -> None:
    """Each locale: /help has /trace only with ``web=on``; "on without an address" names the key."""
    t = Translator()
    assert "/trace" in t.t(lang, "help-text", web="on")
    off = t.t(lang, "help-text", web="off")
    assert "/trace" not in off and "\n\n\n" not in off
    no_url = t.t(lang, "trace-no-url")
    assert "web.public_url" in no_url and no_url != t.t(lang, "trace-off")
    assert t.keys(lang) >= {"trace-no-url", "trace-off", "help-text"}
