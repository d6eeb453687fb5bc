"""The terminal chat against odd input and hostile output: a line it cannot parse, escape
sequences in the model's text, a call "always" cannot cover, SIGINT from outside, and the web
view it does not run alone (review findings on the terminal chat)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.fakes.telegram_server import FakeTelegram
from tests.terminal.harness import terminal_rig
from tests.web.harness import TOKEN

QUESTION: dict[str, Any] = {"question": "Which database?", "options": ["prod", "staging"]}


def _tool_results(body: dict) -> list[str]:  # type: ignore[type-arg]
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


async def test_a_superscript_digit_at_a_question_and_in_cron_kill_keeps_the_chat_alive(
    tmp_path: Path,
) -> None:
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(ToolCalls([("ask_user_clarification", QUESTION)]), Text("Noted the square."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("which db?")
        await rig.wait_for("Answer with a number")
        rig.type("²")  # str.isdigit() is true for it, int() is not
        await rig.wait_for("Noted the square.")
        assert _tool_results(rig.llm.requests[1]) == ["²"]  # the user's own words
        rig.type("/cron kill ²")
        await rig.wait_for("/cron kill <id> stops a running one")
        rig.type("/exit")
        assert await rig.exited() == 0
        assert "Traceback" not in rig.seen


async def test_an_osc_52_sequence_in_a_reply_never_reaches_the_terminal(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        payload = "\x1b]52;c;cm0gLXJmIH4=\x07"  # "set the clipboard to `rm -rf ~`"
        rig.llm.script(Text(f"Before{payload} after. \x1b[2J\x9b2J Done."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("hello")
        await rig.wait_for("Done.")
        rig.type("/exit")
        assert await rig.exited() == 0
        raw = rig._raw
        assert "\x1b]52" not in raw and "\x9b" not in raw and "\x1b[2J" not in raw
        assert "]52;c;cm0gLXJmIH4=" in rig.seen  # the rest of the text shows, harmless


async def test_always_is_no_answer_where_it_is_not_offered(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        piped = "echo hi | tr a-z A-Z"  # no saved rule can cover a pipeline
        rig.llm.script(ToolCalls([Call("execute_cmd", {"command": piped})]), Text("It shouted."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("shout")
        await rig.wait_for("approve?")
        assert "to save a rule" not in rig.seen  # the prompt offers no "always"
        rig.type("always")
        await rig.wait_for("Answer y, n, n <reason> or 15m.")
        rig.type("a")  # the old alias is no answer either
        await rig.wait_for("Answer y, n, n <reason> or 15m.", times=2)
        assert rig.query("SELECT COUNT(*) AS n FROM approval_requests WHERE status = 'pending'")[0]["n"] == 1
        rig.type("y")
        await rig.wait_for("It shouted.")
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_sigint_from_outside_ends_the_chat_beside_the_bot_after_an_exchange(tmp_path: Path) -> None:
    tg = FakeTelegram()
    await tg.start()
    try:
        async with terminal_rig(tmp_path, tg_root=tg.root) as rig:
            rig.llm.script(Text("First answer."))
            rig.start()
            await rig.wait_for("type a message")
            rig.type("hello")
            await rig.wait_for("First answer.")
            assert rig.child is not None
            os.kill(rig.child.pid, signal.SIGINT)  # between prompts: the bot's handler must still be there
            assert await rig.exited() == 0
            assert "shutting down" in rig.log_path.read_text()
            assert "Traceback" not in rig.seen
    finally:
        await tg.stop()


async def test_web_enabled_alone_is_one_warning_line(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path, web={"enabled": True, "token": TOKEN}) as rig:
        rig.start()
        await rig.wait_for("type a message")
        assert rig.seen.count("web.enabled is ignored: the web view runs only beside the Telegram bot") == 1
        rig.type("/exit")
        assert await rig.exited() == 0
