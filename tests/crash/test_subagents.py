"""A sub-agent whose process is SIGKILLed mid-task is resumed on the next start, and its answer
reaches its parent, which then answers the chat once (issue 13, requirement 4). The chat's root
agent runs its sub-agent as a session of its own (issue 29, requirement 3): the child session's
turn and the parent's call both survive the kill, and the task is stored once."""

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
        [child] = rig.query("SELECT id, parent_call_id, closed_at FROM sessions WHERE source = 'agent'")
        assert child["parent_call_id"] is not None and child["closed_at"] is None
        turns = rig.query(
            "SELECT status FROM turns WHERE session_id = ? AND status != 'running'", child["id"]
        )
        assert turns == []  # the child's turn was cut short: it has not answered

        await rig.start()
        await rig.wait_text("Parent says: The fact is 7.")
        await rig.wait_settled()
        rig.assert_consistent("find it")
        assert rig.count("Parent says: The fact is 7.") == 1
        [call] = [c for c in rig.tool_calls() if c["name"] == "execute_task"]
        assert (call["status"], call["result"]) == ("done", "The fact is 7.")
        assert call["id"] == child["parent_call_id"]
        tasks = rig.query("SELECT envelope_id FROM session_mail WHERE session_id = ?", child["id"])
        assert len([t for t in tasks if t["envelope_id"].startswith("task:")]) == 1  # stored once
        [closed] = rig.query("SELECT closed_at FROM sessions WHERE id = ?", child["id"])
        assert closed["closed_at"] is not None  # call-and-return: the child ends with its answer


async def test_a_detached_sub_agent_outlives_a_kill_and_its_answer_arrives_as_mail_once(
    tmp_path: Path,
) -> None:
    """Issue 29, requirement 3: the task detached, then the process died while the child worked;
    the next start adopts the call (it is not orphaned: its child goes on) and the child's answer
    reaches the parent as mail, which tells the chat once."""
    tools = {"attach_overrides": {"execute_task": 0.5}}
    async with crash_rig(tmp_path, tools=tools) as rig:
        folder = rig.workdir / "agents" / "researcher"
        folder.mkdir(parents=True)
        (folder / "AGENT.md").write_text(f"---\ndescription: looks things up\n---\n{RESEARCHER}\n")

        def answer(body: dict[str, Any]) -> Reply:
            said = "\n".join(str(m["content"]) for m in body["messages"])
            if is_child(body):
                return Hang(seconds=60) if rig.starts == 1 else Text("The fact is 7.")
            if "The fact is 7." in said:
                return Text("Parent says: The fact is 7.")
            if tool_results(body):
                return Text("It works in the background.")
            return ToolCalls([TASK])

        rig.llm.handler = answer
        await rig.start()
        rig.say("find it")
        await rig.wait_text("It works in the background.")
        rig.kill_now()
        await rig.reap_killed()
        [run] = rig.query("SELECT status, detached FROM background_calls")
        assert (run["status"], run["detached"]) == ("running", 1)

        await rig.start()
        await rig.wait_text("Parent says: The fact is 7.")
        await rig.wait_settled()
        rig.assert_consistent("find it")
        assert rig.count("Parent says: The fact is 7.") == 1
        [run] = rig.query("SELECT status, result FROM background_calls")
        assert (run["status"], run["result"]) == ("completed", "The fact is 7.")
        [child] = rig.query("SELECT closed_at FROM sessions WHERE source = 'agent'")
        assert child["closed_at"] is not None
        finished = rig.query("SELECT envelope_id FROM session_mail WHERE kind = 'tool_call_finished'")
        assert len(finished) == 1  # one result, mailed once
