"""What a SIGKILL leaves in the chat is finished by the next process: the tool status line it cut
short reads each call's stored outcome (or "⚠️ interrupted"), the prompt still waiting is pointed
at and edited once decided, and no adapter record is left behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER, also_on_postgres
from tests.crash.harness import RESTARTED, CrashRig, crash_rig
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls
from tests.fakes.telegram_server import ApiError, SentMessage

ALLOW_SHELL = {"approval": {"rules": [{"tool": "execute_cmd", "action": "allow", "priority": 5}]}}


def status_lines(rig: CrashRig) -> list[SentMessage]:
    return [m for m in rig.chat() if m.visible_text.startswith("⚙️ execute_cmd")]


def records(rig: CrashRig) -> list[str]:
    rows = rig.query(
        "SELECT key FROM kv_state WHERE key LIKE 'telegram.status_line.%' OR key LIKE 'telegram.prompt.%'"
    )
    return [row["key"] for row in rows]


def recorded_calls(rig: CrashRig) -> list[int]:
    rows = rig.query("SELECT value FROM kv_state WHERE key LIKE 'telegram.status_line.%'")
    return [call for row in rows for call in json.loads(row["value"])["calls"]]


@also_on_postgres
async def test_killed_during_a_tool_call_its_status_line_reads_done_and_interrupted(tmp_path: Path) -> None:
    async with crash_rig(tmp_path, **ALLOW_SHELL) as rig:
        rig.llm.script(
            ToolCalls(
                [
                    ("execute_cmd", {"command": "echo first"}),
                    ("execute_cmd", {"command": "sleep 5; echo done"}),
                ]
            ),
            Text("Both ran."),
        )
        await rig.start()
        rig.say("run both")
        await rig.wait(lambda: len(recorded_calls(rig)) == 2, "the status line recorded with both calls")
        await rig.wait(lambda: "sleep 5" in status_lines(rig)[0].visible_text, "both calls shown")
        (old,) = status_lines(rig)
        await rig.kill()

        await rig.start()
        await rig.wait_text("Both ran.")
        await rig.wait_settled()
        await rig.wait(lambda: records(rig) == [], "the records dropped")
        assert await rig.terminate() == 0
        assert rig.tg.message(ALLOWED_USER, old.message_id).visible_text.splitlines() == [
            "⚙️ execute_cmd · echo first ✓",
            "⚙️ execute_cmd · sleep 5; echo done ⚠️ interrupted",
        ]
        assert [m.visible_text for m in status_lines(rig)[1:]] == ["⚙️ execute_cmd · sleep 5; echo done ✓"]
        rig.assert_consistent("run both")


async def test_killed_before_the_final_mark_was_shown_the_line_reads_it_after_the_restart(
    tmp_path: Path,
) -> None:
    async with crash_rig(tmp_path, **ALLOW_SHELL) as rig:

        def kill_on_the_final_mark(params: dict[str, Any]) -> None:
            if "✓" in str(params.get("text")) and rig.kills == 0:
                rig.kill_now()
                raise ApiError(502, "Bad Gateway")  # the edit never reaches the chat

        def answer(body: dict[str, Any]) -> Reply:
            if not any(m["role"] == "tool" for m in body["messages"]):
                return ToolCalls([("execute_cmd", {"command": "echo one"})])
            return Text("Ran it.") if rig.starts > 1 else Hang(seconds=30)

        rig.llm.handler = answer
        rig.tg.before["editmessagetext"] = kill_on_the_final_mark
        await rig.start()
        rig.say("run it")
        await rig.wait(lambda: rig.kills == 1, "the kill at the final mark")
        await rig.reap_killed()
        (line,) = status_lines(rig)
        assert line.visible_text.endswith("…")

        await rig.start()
        await rig.wait_text("Ran it.")
        await rig.wait_settled()
        await rig.wait(lambda: records(rig) == [], "the records dropped")
        assert await rig.terminate() == 0
        assert rig.tg.message(ALLOWED_USER, line.message_id).visible_text == "⚙️ execute_cmd · echo one ✓"
        assert len(status_lines(rig)) == 1, "nothing was left to re-run"
        rig.assert_consistent("run it")


async def test_killed_with_a_prompt_waiting_the_notice_points_at_it_and_the_decision_edits_it(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran"})]), Text("Ran it."))
        await rig.start()
        rig.say("run it")
        prompt = await rig.wait_containing("Approval needed")
        await rig.wait(lambda: len(records(rig)) == 2, "the status line and the prompt recorded")
        await rig.wait(
            lambda: bool(
                rig.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)
            ),
            "the prompt bound to its request",  # what the notice refers to; stored just after
        )
        await rig.kill()

        await rig.start()
        notice = await rig.wait_containing(RESTARTED)
        assert notice.reply_to_message_id == prompt.message_id
        rig.tg.press_button_labeled(ALLOWED_USER, prompt.message_id, "Approve")
        await rig.wait_text("Ran it.")
        await rig.wait_settled()
        await rig.wait(lambda: records(rig) == [], "the records dropped")
        assert await rig.terminate() == 0
        decided = rig.tg.message(ALLOWED_USER, prompt.message_id)
        assert decided.visible_text.endswith("✅ Approved") and not decided.buttons
        assert "reply to this message" not in decided.visible_text
        assert [m.message_id for m in rig.chat() if m.reply_to_message_id == prompt.message_id] == [
            notice.message_id
        ]
        assert rig.count("✅ Approved") == 0, "the decision edits the prompt, it is not a reply"
        rig.assert_consistent("run it")
