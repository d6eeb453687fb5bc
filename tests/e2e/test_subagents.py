"""Sub-agents through the real bot: the chat sees a child start and finish, then the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text, ToolCalls

ASK: tuple[str, dict[str, Any] | str] = (
    "execute_task",
    {"agent": "researcher", "task": "What is the answer?"},
)
RESEARCHER = """\
---
description: finds facts
tools: [read_file, list_dir]
---
You are the researcher. Answer with the fact only.
"""


async def test_the_chat_sees_main_hand_a_task_to_a_sub_agent_and_its_answer(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "agents" / "researcher"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(RESEARCHER)
    async with running_bot(tmp_path) as rig:
        rig.llm.script(
            ToolCalls([ASK]),
            Text("It is 42, according to the guide."),  # the researcher
            Text("The answer is 42."),  # main, with the researcher's answer
        )
        rig.say("ask the researcher")
        await rig.wait_turns()
        await rig.wait_text("🤖 main → researcher")
        finished = await rig.wait_text("✅ researcher finished")
        assert "It is 42, according to the guide." in finished.visible_text
        await rig.wait_text("The answer is 42.")
        child, parent = rig.llm.requests[1], rig.llm.requests[2]
        assert child["messages"][0]["content"] == "You are the researcher. Answer with the fact only."
        assert [t["function"]["name"] for t in child["tools"]] == ["read_file", "list_dir"]
        assert [m["content"] for m in parent["messages"] if m["role"] == "tool"] == [
            "It is 42, according to the guide."
        ]
        texts = [m.visible_text for m in rig.chat()]
        assert not any(
            t.startswith("It is 42") for t in texts
        )  # the child's text is not streamed to the chat
