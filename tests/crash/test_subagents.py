"""A sub-agent whose process is SIGKILLed mid-task is resumed on the next start, and its answer
reaches its parent, which then answers the chat once (issue 13, requirement 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import crash_rig
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls

pytestmark = ONE_DRIVER  # the driver takes no part in what is killed and recovered here

RESEARCHER = "You are the researcher."
TASK: tuple[str, dict[str, Any] | str] = ("execute_task", {"agent": "researcher", "task": "find the fact"})


def is_child(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and body["messages"][0]["content"] == RESEARCHER


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_a_child_killed_mid_task_is_resumed_and_its_answer_reaches_the_parent(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        folder = rig.workdir / "agents" / "researcher"
        folder.mkdir(parents=True)
        (folder / "AGENT.md").write_text(f"---\ndescription: looks things up\n---\n{RESEARCHER}\n")

        def answer(body: dict[str, Any]) -> Reply:
            if is_child(body):
                if rig.starts == 1:
                    rig.kill_now()  # the child has its request: the process dies mid-child
                    return Hang(seconds=30)
                return Text("The fact is 7.")
            if results := tool_results(body):
                return Text(f"Parent says: {results[0]}")
            return ToolCalls([TASK])

        rig.llm.handler = answer
        await rig.start()
        rig.say("find it")
        await rig.wait(lambda: rig.kills == 1, "the kill inside the child")
        await rig.reap_killed()
        frames = rig.query("SELECT depth, active FROM stack_frames WHERE depth > 0")
        assert [(f["depth"], f["active"]) for f in frames] == [(1, 1)]  # the child frame was left active

        await rig.start()
        await rig.wait_text("Parent says: The fact is 7.")
        await rig.wait_settled()
        rig.assert_consistent("find it")
        assert rig.count("Parent says: The fact is 7.") == 1
        frames = rig.query("SELECT active FROM stack_frames WHERE depth > 0")
        assert [f["active"] for f in frames] == [0]
        [call] = [c for c in rig.tool_calls() if c["name"] == "execute_task"]
        assert (call["status"], call["result"]) == ("done", "The fact is 7.")
        child_rows = rig.query(
            "SELECT content FROM chat_history WHERE stack_id IS NOT NULL AND role = 'user'"
        )
        assert [r["content"] for r in child_rows] == ["find the fact"]  # the task stored once
