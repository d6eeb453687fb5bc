"""Watches end to end (issue 29, ``watch_session``): the chat's agent spawns a helper and watches
it; the helper's command, approved with its prompt's button, completes, and the parent wakes on
the watch's mail with the command's output."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.harness import running_bot
from tests.e2e.test_approvals import tap, wait_prompt
from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.peers_rig import LLM, helper_agent

WATCH: dict[str, object] = {
    "session": "2",
    "events": ["tool.completed"],
    "tool": "execute_cmd",
    "ttl_seconds": 600,
}


async def test_a_watch_wakes_the_parent_when_a_childs_command_completes(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(
            ToolCalls([Call("spawn_session", {"agent": "helper", "task": "say the word"})]),
            ToolCalls([Call("watch_session", WATCH)]),
            Text("Watching the helper."),
            Text("The helper's command printed watched-output."),  # woken by the watch's mail
        )
        rig.llm.on_model(
            "helper-model",
            ToolCalls([Call("execute_cmd", {"command": "echo watched-output"})]),
            Text("Said it."),
        )
        rig.say("run a helper and tell me when its command is done")
        await rig.wait_text("Watching the helper.", timeout=10)
        results = [m["content"] for r in rig.llm.requests for m in r["messages"] if m["role"] == "tool"]
        watched = json.loads(next(r for r in results if "watch_id" in r))
        assert watched["session_id"] == 2 and watched["events"] == ["tool.completed"]
        tap(rig, await wait_prompt(rig), "✅ Approve")  # the helper's command: only now it runs
        await rig.wait_text("The helper's command printed watched-output.", timeout=10)

        woken = [r for r in rig.llm.requests if r["model"] != "helper-model"][-1]
        mail = [
            str(m["content"])
            for m in woken["messages"]
            if m["role"] == "user" and "[watch]" in str(m["content"])
        ]
        assert len(mail) == 1, mail
        assert "[watch] session 2: tool execute_cmd completed (status completed): " in mail[0]
        assert "watched-output" in mail[0]
        rig.llm.assert_complete()
