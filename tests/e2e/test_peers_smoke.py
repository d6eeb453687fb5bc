"""Sessions that talk to each other (issue 29), end to end: the chat's agent spawns a helper
session, the helper writes back, and the parent wakes on its mail."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text, ToolCalls
from tests.peers_rig import LLM, helper_agent


async def test_a_spawned_session_writes_back_and_its_parent_wakes(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(
            ToolCalls([("spawn_session", {"agent": "helper", "task": "find the answer"})]),
            Text("I asked a helper."),
            Text("The helper says 42."),  # the parent, woken by its child's mail
        )
        rig.llm.on_model(
            "helper-model",
            ToolCalls([("send_message", {"session": "parent", "text": "the answer is 42"})]),
            Text("Sent."),
        )
        rig.say("find the answer with a helper")
        await rig.wait_text("The helper says 42.", timeout=10)
        spawned = next(r for r in rig.llm.requests if r["model"] == "helper-model")
        said = [m["content"] for m in spawned["messages"] if m["role"] == "user"]
        assert "started by session 1" in said[0] and "find the answer" in said[0]
        result = next(m["content"] for m in rig.llm.requests[1]["messages"] if m["role"] == "tool")
        assert json.loads(result)["session_id"] == 2
        woken = [r for r in rig.llm.requests if r["model"] != "helper-model"][-1]
        assert any("the answer is 42" in str(m["content"]) for m in woken["messages"] if m["role"] == "user")
