"""Memory across conversations, through the real python-telegram-bot and openai SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Call, Text, ToolCalls

FACT = "The user's cat is called Miso"


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def _tool_result(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in reversed(request["messages"]) if m["role"] == "tool")


async def test_remembered_fact_survives_new_in_prompt_and_recall(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ToolCalls([Call("remember", {"text": FACT})]), Text("Noted."), Text("Hello again."))
        rig.say("my cat is called Miso, remember that")
        await rig.wait_turns(1)
        assert not [m for m in rig.chat() if m.buttons], "remember needs no approval"
        assert FACT in (rig.workdir / "memory" / "MEMORY.md").read_text()
        assert "Remembered" in _tool_result(rig.llm.requests[1])
        rig.say("hi")
        await rig.wait_turns(2)
        first, same_session = _system(rig.llm.requests[0]), _system(rig.llm.requests[2])
        assert same_session == first, "the static system message is byte-identical within a session"
        assert FACT not in first

        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        rig.llm.script(ToolCalls([Call("recall", {"query": "cat"})]), Text("Your cat is Miso."))
        rig.say("what is my cat called?")
        await rig.wait_turns(3)
        fresh = _system(rig.llm.requests[3])
        assert fresh.startswith(first) and FACT in fresh, "the next session's prompt holds the memory"
        assert FACT in _tool_result(rig.llm.requests[4]), "recall finds it"
        assert rig.texts()[-1] == "Your cat is Miso."


async def test_file_tool_writes_under_memory_need_no_approval(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        call = {"path": "memory/projects.md", "content": "- agentgram: issue 13\n"}
        rig.llm.script(ToolCalls([Call("write_file", call)]), Text("Saved."))
        rig.say("note my project")
        await rig.wait_turns(1)
        assert not [m for m in rig.chat() if m.buttons]
        assert (rig.workdir / "memory" / "projects.md").read_text() == "- agentgram: issue 13\n"
