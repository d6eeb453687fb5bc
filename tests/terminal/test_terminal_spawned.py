"""The helpers a terminal session's agent spawns (issue 29), as the terminal shows them: each
final answer once under the helper's name, a failed turn likewise, its approval prompts and
questions under a line naming who asks and answered by a typed line; never its tool lines. Beside
the Telegram bot, the helper's approval stays the terminal's (the bot neither shows nor expires it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.fakes.openai_server import Error, Text
from tests.fakes.telegram_server import FakeTelegram
from tests.peers_rig import LLM, call, helper_agent
from tests.terminal.harness import TerminalRig, terminal_rig

NAMED = "🤖 researcher (session 2)"
"""How the helper's lines start (its name is the spawn's ``name``; the terminal's session is 1)."""


SPAWN = call("spawn_session", agent="helper", task="find the answer", name="researcher")


def _requests(rig: TerminalRig, *, helper: bool) -> list[dict[str, Any]]:
    return [r for r in rig.llm.requests if (r["model"] == "helper-model") == helper]


async def _started(rig: TerminalRig, line: str) -> None:
    rig.start()
    await rig.wait_for("type a message")
    rig.type(line)


async def test_a_helpers_answer_shows_once_under_its_name_and_its_tool_lines_never(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with terminal_rig(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("I asked a helper."), Text("Noted."))
        rig.llm.on_model("helper-model", call("list_sessions"), Text("Found: **42**."))
        await _started(rig, "find the answer with a helper")
        await rig.wait_for(f"{NAMED}:")
        await rig.wait_for("Found: 42.")  # rendered as Markdown, as the terminal's own answers
        await rig.wait_for("I asked a helper.")
        rig.type("thanks")  # a later exchange: whatever the helper would still print came before it
        await rig.wait_for("Noted.")

        assert rig.seen.count("Found: 42.") == 1, rig.seen
        assert rig.seen.count(NAMED) == 1, rig.seen
        assert rig.seen.index(NAMED) < rig.seen.index("Found: 42.")
        assert "spawn_session" in rig.seen, "the terminal's own tool line shows"
        assert "list_sessions" not in rig.seen, "the helper's tool lines never show"
        assert len(_requests(rig, helper=True)) == 2
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_a_helpers_approval_names_it_and_a_typed_yes_runs_the_command(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with terminal_rig(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model("helper-model", call("execute_cmd", command="echo from-the-helper"), Text("Ran it."))
        await _started(rig, "find the answer with a helper")
        await rig.wait_for(f"{NAMED} asks:")
        await rig.wait_for("approve?")
        await rig.wait_for("Approval needed")  # the prompt line may show before the title is printed
        assert rig.seen.index(f"{NAMED} asks:") < rig.seen.index("Approval needed")
        rig.type("y")
        await rig.wait_for("Ran it.")
        results = [m["content"] for m in _requests(rig, helper=True)[-1]["messages"] if m["role"] == "tool"]
        assert any("from-the-helper" in str(result) for result in results), results
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_a_helpers_question_takes_the_typed_line_as_its_answer(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with terminal_rig(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model(
            "helper-model", call("ask_user_clarification", question="Which database?"), Text("Using it.")
        )
        await _started(rig, "find the answer with a helper")
        await rig.wait_for(f"{NAMED} asks:")
        await rig.wait_for("Which database?")
        await rig.wait_for("Asked.")
        rig.type("the replica")
        await rig.wait_for("Using it.")
        said = [str(m["content"]) for m in _requests(rig, helper=True)[-1]["messages"]]
        assert any("the replica" in text for text in said), said
        assert len(_requests(rig, helper=False)) == 2, "the terminal's own agent never read the answer"
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_a_helpers_failed_turn_is_told_under_its_name(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with terminal_rig(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model("helper-model", Error(400, "the request was refused"))
        await _started(rig, "find the answer with a helper")
        await rig.wait_for(f"{NAMED}: ⚠️ The model refused my request (HTTP 400)")
        await rig.wait_for("Asked.")
        assert rig.seen.count(NAMED) == 1, rig.seen
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_beside_the_bot_a_helpers_approval_is_the_terminals_alone(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    tg = FakeTelegram()
    await tg.start()
    try:
        async with terminal_rig(tmp_path, tg_root=tg.root, llm=LLM) as rig:
            rig.llm.script(SPAWN, Text("Asked."))
            rig.llm.on_model(
                "helper-model", call("execute_cmd", command="echo from-the-helper"), Text("Ran it.")
            )
            await _started(rig, "find the answer with a helper")
            await rig.wait_for("approve?")
            rig.type("y")
            await rig.wait_for(f"{NAMED}:")
            await rig.wait_for("Ran it.")
            assert "expired" not in rig.seen, rig.seen
            results = [
                m["content"] for m in _requests(rig, helper=True)[-1]["messages"] if m["role"] == "tool"
            ]
            assert any("from-the-helper" in str(result) for result in results), results
            assert not tg.messages(ALLOWED_USER), "the bot shows nothing of the terminal's helper"
            rig.type("/exit")
            assert await rig.exited() == 0
    finally:
        await tg.stop()
