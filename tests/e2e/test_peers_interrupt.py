"""``send_message`` with ``interrupt`` (issue 29): a helper session whose turn is attached to a
long command is not made to wait out ``tools.attach_seconds``: the interrupting mail detaches the
command at once, and the helper's next step reads the mail. Mail without ``interrupt`` waits."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text
from tests.peers_rig import LLM, call, helper_agent

HELPER = """\
---
description: runs long commands
model: helper
---
You are the helper.
"""
TOOLS = {"attach_seconds": 60}


def _helper_requests(rig: Rig) -> list[dict[str, Any]]:
    return [r for r in rig.llm.requests if r["model"] == "helper-model"]


async def _helper_asks_to_run_the_long_job(rig: Rig) -> Any:
    """The chat spawns the helper, whose ``sleep 30`` waits for approval; the prompt. The chat's
    next message has it send the helper interrupting mail."""
    rig.llm.script(
        call("spawn_session", agent="helper", task="run the long job"),
        Text("A helper runs it."),
        call("send_message", session="2", text="stop and report now", interrupt=True),
        Text("Told it."),
    )
    rig.llm.on_model("helper-model", call("execute_cmd", command="sleep 30"), Text("Reporting: interrupted."))
    rig.say("run the long job with a helper")
    return await rig.wait_text("Approval needed", timeout=10)


async def _the_helper_reads_the_mail_before_the_command_ends(rig: Rig, started: float) -> None:
    await rig.tg.wait_for(lambda: len(_helper_requests(rig)) == 2, timeout=20)
    assert time.monotonic() - started < 20, "the interrupt did not wait out attach_seconds (60 s)"
    said = "\n".join(str(m["content"]) for m in _helper_requests(rig)[1]["messages"])
    assert "stop and report now" in said
    assert "still running" in said or "detached" in said, "the command was detached, not finished"


async def test_interrupting_mail_detaches_the_helpers_long_command_at_once(tmp_path: Path) -> None:
    helper_agent(tmp_path, HELPER)
    async with running_bot(tmp_path, llm=LLM, tools=TOOLS) as rig:
        prompt = await _helper_asks_to_run_the_long_job(rig)
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"))
        await rig.llm.wait_for_requests(3, timeout=10)  # the chat's two and the helper's first
        started = time.monotonic()
        rig.say("tell it to stop and report")
        await _the_helper_reads_the_mail_before_the_command_ends(rig, started)


async def test_interrupting_mail_that_came_before_the_command_started_detaches_it_as_it_starts(
    tmp_path: Path,
) -> None:
    """The mail arrives while the helper's command still waits for its approval: once approved, the
    command is detached at once instead of holding the turn for ``attach_seconds``."""
    helper_agent(tmp_path, HELPER)
    async with running_bot(tmp_path, llm=LLM, tools=TOOLS) as rig:
        prompt = await _helper_asks_to_run_the_long_job(rig)
        rig.say("tell it to stop")  # before the command may start
        await rig.wait_text("Told it.", timeout=10)
        started = time.monotonic()
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"))
        await _the_helper_reads_the_mail_before_the_command_ends(rig, started)
