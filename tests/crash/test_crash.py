"""Crash tests: the real bot process is SIGKILLed at several points and started again.

Every scenario ends with the same checks (:meth:`CrashRig.assert_consistent`): each user
message is stored once and not orphaned, no turn is left running, no mail unread, every
stored tool call belongs to an assistant row once and has exactly one terminal status,
and every request the model received (before and after the restart) passes the fake's
OpenAI-strict validation, so an unpaired call would have been a 400. Replies are
counted in the chat: nothing is answered twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ALLOWED_USER, also_on_postgres
from tests.crash.harness import RESTARTED, CrashRig, cmdline, crash_rig, descendants
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls
from tests.fakes.telegram_server import ApiError

ALLOW_SHELL = {"approval": {"rules": [{"tool": "execute_cmd", "action": "allow", "priority": 5}]}}


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("kill_point", ["mail_stored", "offset_lost", "request_sent", "llm_request"])
@also_on_postgres
async def test_killed_right_after_receiving_a_message_answers_it_once(
    tmp_path: Path, kill_point: str
) -> None:
    """Kill points: ``mail_stored`` — the mail and the offset are stored (as a rule before the
    turn starts); ``offset_lost`` — the mail is stored but the offset never was (nor reached
    Telegram), so the update is redelivered and must be dropped as a duplicate;
    ``request_sent`` — the model has the request, which goes out while the turn is being
    opened (runtime/turn/prefetch.py): open or not, the message is answered once;
    ``llm_request`` — the model has the request and the turn is open."""
    async with crash_rig(tmp_path) as rig:
        update_id = 0

        def kill_once_confirmed(params: dict[str, Any]) -> None:
            # the bot stored the mail and then the offset; this poll confirms the update
            if update_id and int(params.get("offset") or 0) > update_id and rig.kills == 0:
                rig.kill_now()
                if kill_point == "offset_lost":
                    raise ApiError(502, "Bad Gateway")  # the confirming poll never arrives

        def answer(body: dict[str, Any]) -> Reply:
            if rig.starts > 1:
                return Text("Pong.")
            if kill_point == "request_sent" and rig.kills == 0:
                rig.kill_now()
            return Hang(seconds=30)

        rig.llm.handler = answer
        if kill_point in ("mail_stored", "offset_lost"):
            rig.tg.before["getupdates"] = kill_once_confirmed
        await rig.start()
        update_id = rig.say("ping")
        if kill_point == "llm_request":
            await rig.llm.wait_for_requests(1)
            await rig.wait(lambda: rig.turn_statuses() == ["running"], "the turn open")
            rig.kill_now()
        await rig.wait(lambda: rig.kills == 1, "the kill point")
        await rig.reap_killed()
        assert rig.count("Pong.") == 0
        if kill_point == "offset_lost":
            rig.write_db("DELETE FROM kv_state WHERE key = 'telegram.update_offset'")
            assert update_id in rig.tg.unconfirmed()
        polls = len(rig.tg.calls("getUpdates"))

        await rig.start()
        await rig.wait_text("Pong.")
        await rig.wait_settled()
        # the recovered turn may answer before the redelivered update is even polled
        await rig.wait(lambda: update_id not in rig.tg.unconfirmed(), "the update confirmed")
        assert await rig.terminate() == 0
        assert rig.count("Pong.") == 1
        if kill_point == "offset_lost":  # the update came again and was recognised
            assert int(rig.tg.calls("getUpdates")[polls].params.get("offset") or 0) <= update_id
        if kill_point == "llm_request":  # a turn was running: it is resumed, and the user told
            assert rig.count_containing(RESTARTED) == 1
        rig.assert_consistent("ping")


async def test_killed_during_the_llm_call_resumes_and_answers_once(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(Hang("Let me think", seconds=60), Text("Four."))
        await rig.start()
        rig.say("what is 2+2?")
        await rig.wait(lambda: rig.drafted("Let me think"), "a draft containing 'Let me think'")
        await rig.kill()
        before = len(rig.llm.requests)

        await rig.start()
        await rig.wait_text("Four.")
        await rig.wait_containing(RESTARTED)
        await rig.wait_settled()
        assert await rig.terminate() == 0
        assert rig.count("Four.") == 1
        assert rig.count_containing(RESTARTED) == 1
        assert len(rig.llm.requests) == before + 1  # the interrupted round is asked again, once
        rig.assert_consistent("what is 2+2?")


async def test_killed_during_a_tool_call_reruns_only_the_interrupted_call(tmp_path: Path) -> None:
    async with crash_rig(tmp_path, **ALLOW_SHELL) as rig:
        rig.llm.script(
            ToolCalls(
                [
                    ("execute_cmd", {"command": "echo first >> log.txt"}),
                    ("execute_cmd", {"command": "sleep 5; echo done >> marker.txt"}),
                ]
            ),
            Text("Both ran."),
        )
        await rig.start()
        rig.say("run both")
        await rig.wait(lambda: _running(rig, "sleep 5"), "the sleep command to run")
        await rig.kill()
        assert lines(rig.workdir / "log.txt") == ["first"]
        assert [c["status"] for c in rig.tool_calls()] == ["done", "running"]
        before = len(rig.llm.requests)

        await rig.start()
        await rig.wait_text("Both ran.")
        await rig.wait_settled()
        assert await rig.terminate() == 0
        assert lines(rig.workdir / "log.txt") == ["first"], "a call recorded done was run again"
        assert lines(rig.workdir / "marker.txt") == ["done"], "the interrupted call was not re-run once"
        assert [c["status"] for c in rig.tool_calls()] == ["done", "done"]
        assert rig.count("Both ran.") == 1
        assert rig.count_containing(RESTARTED) == 1
        after = rig.llm.requests[before:]
        assert len(after) == 1
        results = tool_messages(after[0])
        assert len(results) == 2 and all("interrupted" not in r for r in results.values())
        rig.assert_consistent("run both")


async def test_killed_with_an_approval_pending_the_old_button_still_works(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        await rig.start()
        rig.say("run it")
        prompt = await rig.wait_containing("Approval needed")
        await rig.wait(
            lambda: bool(
                rig.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)
            ),
            "the prompt bound to its request",
        )
        await rig.kill()

        await rig.start()
        await rig.wait_containing(RESTARTED)
        assert rig.count_containing("Approval needed") == 1, "the old prompt should stay valid, not re-sent"
        approve = prompt.button_data("Approve")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve)
        await rig.wait_text("Ran it.")
        await rig.wait_settled()
        # a second tap of the stale button (a client that still shows it) runs nothing
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)
        await rig.wait(lambda: not rig.tg.unanswered_callbacks(), "both taps answered")
        await rig.wait_settled()
        assert await rig.terminate() == 0

        assert lines(rig.workdir / "marker.txt") == ["ran"]
        assert [r["status"] for r in rig.query("SELECT status FROM approval_requests")] == ["approved"]
        assert [a.text for a in rig.tg.callback_answers][-1].startswith("This request is no longer pending")
        assert not rig.tg.message(ALLOWED_USER, prompt.message_id).buttons, (
            "the old prompt keeps its keyboard"
        )
        assert rig.count("Ran it.") == 1
        rig.assert_consistent("run it")


async def test_sigterm_exits_cleanly_and_leaves_the_turn_resumable(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(Hang("Working on it", seconds=60), Text("Finished."))
        await rig.start()
        rig.say("long job")
        await rig.wait(lambda: rig.drafted("Working on it"), "a draft containing 'Working on it'")
        assert await rig.terminate(within=5.0) == 0
        assert rig.turn_statuses() == ["running"]
        await rig.llm.wait_stream_closed()

        await rig.start()
        await rig.wait_text("Finished.")
        await rig.wait_settled()
        assert await rig.terminate() == 0
        assert rig.count("Finished.") == 1
        assert rig.count_containing(RESTARTED) == 1
        rig.assert_consistent("long job")


def _running(rig: CrashRig, needle: str) -> bool:
    assert rig.proc is not None
    return any(needle in cmdline(pid) for pid in descendants(rig.proc.pid))


async def test_killed_while_the_approval_prompt_was_sent_it_is_reissued(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))

        def kill_on_prompt(params: dict[str, Any]) -> None:
            # Telegram shows the prompt, but the bot dies before it learns the message id
            if "Approval needed" in str(params.get("text")) and rig.kills == 0:
                rig.kill_now()

        rig.tg.before["sendmessage"] = kill_on_prompt
        await rig.start()
        rig.say("run it")
        await rig.wait(lambda: rig.kills == 1, "the kill while sending the prompt")
        await rig.reap_killed()
        assert [r["message_id"] for r in rig.query("SELECT message_id FROM approval_requests")] == [None]

        await rig.start()
        await rig.wait(lambda: rig.count_containing("Approval needed") == 2, "the prompt re-issued")
        old, new = [m for m in rig.chat() if "Approval needed" in m.visible_text]
        rig.tg.press_button_labeled(ALLOWED_USER, new.message_id, "Approve")
        await rig.wait_text("Ran it.")
        await rig.wait_settled()
        rig.tg.press_button(ALLOWED_USER, old.message_id, old.button_data("Approve"))  # the orphaned prompt
        await rig.wait(lambda: not rig.tg.unanswered_callbacks(), "both taps answered")
        await rig.wait_settled()
        assert await rig.terminate() == 0

        assert lines(rig.workdir / "marker.txt") == ["ran"]
        assert [r["status"] for r in rig.query("SELECT status FROM approval_requests")] == ["approved"]
        assert "Approved" in rig.tg.message(ALLOWED_USER, new.message_id).visible_text
        assert (rig.tg.callback_answers[-1].text or "").startswith("This request is no longer pending")
        assert rig.count("Ran it.") == 1
        rig.assert_consistent("run it")


async def test_killed_after_the_answer_was_stored_it_is_not_answered_again(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(Text("Pong."))
        await rig.start()
        rig.say("ping")
        await rig.wait_text("Pong.")
        await rig.wait_settled()
        await rig.kill()
        # the window between storing the final answer and closing the turn, staged exactly
        rig.write_db("UPDATE turns SET status = 'running', ended_at = NULL")
        before = len(rig.llm.requests)

        await rig.start()
        await rig.wait_settled()
        assert await rig.terminate() == 0
        assert rig.turn_statuses() == ["final"]
        assert len(rig.llm.requests) == before, "the model was asked again for an answered message"
        assert rig.count("Pong.") == 1
        assert rig.count_containing(RESTARTED) == 0, "nothing was left to continue"
        rig.assert_consistent("ping")


async def test_killed_right_after_a_stop_the_turn_is_not_resumed(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.llm.script(Hang("Thinking", seconds=60))
        stop_update = 0

        def kill_once_stop_confirmed(params: dict[str, Any]) -> None:
            if stop_update and int(params.get("offset") or 0) > stop_update and rig.kills == 0:
                rig.kill_now()

        rig.tg.before["getupdates"] = kill_once_stop_confirmed
        await rig.start()
        rig.say("long job")
        await rig.wait(lambda: rig.drafted("Thinking"), "a draft containing 'Thinking'")
        stop_update = rig.say("/stop")
        await rig.wait(lambda: rig.kills == 1, "the kill after /stop was stored")
        await rig.reap_killed()
        stop_unread = f"tg:{stop_update}" in rig.unread_mail()
        # The kill lands anywhere after the stop was stored. The notice is recorded before it is
        # sent and marked shown after the Bot API accepted it, so a kill between those two is the
        # one window (the Bot API has no idempotency key) where it is shown again after the
        # restart: that is the outbox's at-least-once promise, and the only repeat allowed.
        shown_before = rig.count("⏹ Stopped.")
        unshown = rig.query("SELECT id FROM outbox WHERE kind = 'notice' AND delivered_at IS NULL")
        before = len(rig.llm.requests)

        await rig.start()
        await rig.wait_settled()
        if stop_unread or unshown:  # the stop is settled after the restart, and the user told
            await rig.wait(lambda: rig.count("⏹ Stopped.") > shown_before, "the stop's notice")
        assert await rig.terminate() == 0
        assert rig.turn_statuses() == ["cancelled"]
        assert len(rig.llm.requests) == before, "a stopped turn was resumed"
        assert rig.count_containing(RESTARTED) == 0
        expected = shown_before + (1 if stop_unread or unshown else 0)
        assert rig.count("⏹ Stopped.") == expected, "a notice recorded as shown was sent again"
        assert expected <= 1 or (shown_before == 1 and unshown), "the notice repeats only from its one window"
        rig.assert_consistent("long job")


async def test_killed_before_the_chat_showed_a_stored_answer_it_is_sent_after_restart(tmp_path: Path) -> None:
    # with a long first-text delay the answer's one send happens after it was stored
    async with crash_rig(tmp_path, telegram={"stream_first_delay": 5}) as rig:
        rig.llm.script(Text("Pong."))

        def kill_on_answer(params: dict[str, Any]) -> None:
            if "Pong." in str(params.get("text")) and rig.kills == 0:
                rig.kill_now()
                raise ApiError(502, "Bad Gateway")  # the answer never reaches the chat

        rig.tg.before["sendmessage"] = kill_on_answer
        await rig.start()
        rig.say("ping")
        await rig.wait(lambda: rig.kills == 1, "the kill while the answer was sent")
        await rig.reap_killed()
        assert rig.count("Pong.") == 0
        assert rig.turn_statuses() == ["final"], "the answer was stored with the turn's end"

        await rig.start()
        await rig.wait_text("Pong.")
        await rig.wait_settled()
        await rig.wait(
            lambda: (
                rig.query("SELECT delivered_at FROM chat_history WHERE role = 'assistant'")[0][0] is not None
            ),
            "the answer marked shown",
        )
        assert await rig.terminate() == 0
        assert rig.count("Pong.") == 1
        assert len(rig.llm.requests) == 1, "the stored answer was sent, the model not asked again"
        rig.assert_consistent("ping")
