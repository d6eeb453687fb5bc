"""A sub-agent's task that outlives ``tools.attach_seconds`` detaches like a long command (issue
29, requirement 3): its placeholder names the child session, the parent writes to the child while
it works, and the child's final answer arrives as ``tool_call_finished`` mail that wakes the
parent, which tells the chat. The child's answer is the call's, never a message of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text
from tests.peers_rig import HELPER_MODEL, LLM, call, helper_agent

TOOLS = {"attach_seconds": 60, "attach_overrides": {"execute_task": 0.5}}


def _requests(rig: Rig, model: str | None = None) -> list[dict[str, Any]]:
    return [r for r in rig.llm.requests if (r["model"] == HELPER_MODEL) == (model == HELPER_MODEL)]


def _said(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"])


async def test_a_detached_sub_agent_is_messaged_while_it_works_and_its_answer_arrives_as_mail(
    tmp_path: Path,
) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM, tools=TOOLS) as rig:
        rig.llm.script(
            call("execute_task", agent="helper", task="count to three"),
            call("send_message", session="2", text="count to four instead"),
            Text("The helper counts in the background."),
            Text("The helper says: one two three four."),
        )
        rig.llm.on_model(
            HELPER_MODEL,
            call("wait", **{"for": "mail", "timeout_seconds": 30}),  # works until its parent writes
            Text("one two three four"),
        )
        rig.say("have the helper count in the background")
        await rig.wait_text("The helper counts in the background.", timeout=20)
        await rig.wait_text("The helper says: one two three four.", timeout=20)

        main = _requests(rig)
        [placeholder] = [m["content"] for m in main[1]["messages"] if m["role"] == "tool"]
        detached = json.loads(placeholder)
        assert detached["status"] == "running" and detached["session_id"] == 2
        assert "send_message" in detached["message"]

        helper = _requests(rig, HELPER_MODEL)
        assert len(helper) == 2
        assert "count to three" in _said(helper[0])
        assert "count to four instead" in _said(helper[1])  # the parent's mail, read while it works

        woken = _said(main[3])  # the parent's turn the call's end woke
        assert "execute_task" in woken and "completed" in woken and "one two three four" in woken

        texts = [m.visible_text for m in rig.chat()]
        assert any(t.startswith("🤖 main → helper") for t in texts)
        assert any(t.startswith("✅ helper finished") for t in texts)
        assert not any("(session 2):" in t for t in texts)  # its answer is the call's, not the chat's
        assert texts.count("The helper says: one two three four.") == 1
