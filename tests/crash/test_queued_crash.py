"""A choice for a queued message survives a SIGKILL between the press and its effect (issue 30):
⏭ After is stored with the message when pressed, so the turn the restart resumes still leaves the
message out, and the next turn starts on it, once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import crash_rig
from tests.fakes.openai_server import Reply, Text, ToolCalls

pytestmark = ONE_DRIVER  # the driver takes no part in what is killed and recovered here

ALLOW_SHELL = {"rules": [{"tool": "execute_cmd", "action": "allow"}]}
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"
HELD = "then summarise it"


def _users(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]


async def test_after_pressed_then_killed_still_holds_the_message_for_the_next_turn(tmp_path: Path) -> None:
    async with crash_rig(tmp_path, approval=ALLOW_SHELL) as rig:

        def answer(body: dict[str, Any]) -> Reply:
            users = _users(body)
            if users[-1] == HELD:
                return Text("Here is the summary.")
            if any(m["role"] == "tool" for m in body["messages"]):
                return Text("First done.")
            return ToolCalls([("execute_cmd", {"command": WAIT_FOR_GO})])

        rig.llm.handler = answer
        await rig.start()
        rig.say("run the thing")
        await rig.wait(lambda: len(rig.llm.requests) == 1, "the command running")
        rig.say(HELD)
        noted = await rig.wait_containing("Noted")
        rig.tg.press_button(ALLOWED_USER, noted.message_id, noted.button_data("⏭ After"))
        await rig.wait(
            lambda: bool(rig.query("SELECT 1 FROM session_mail WHERE steer = 'after'")),
            "the choice stored with the message",
        )
        rig.kill_now()
        await rig.reap_killed()

        await rig.start()  # the resumed turn runs the interrupted command again
        (rig.workdir / "go").touch()
        await rig.wait_text("First done.")
        await rig.wait_text("Here is the summary.")
        await rig.wait_settled(2)
        rig.assert_consistent("run the thing", HELD)
        resumed = [body for body in rig.llm.requests if _users(body)[-1] != HELD]
        assert all(HELD not in _users(body) for body in resumed), "the held message leaked into the turn"
        assert sum(_users(body)[-1] == HELD for body in rig.llm.requests) == 1
        assert rig.count("Here is the summary.") == 1
