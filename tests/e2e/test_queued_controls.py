"""A message sent while the agent works is acknowledged with ⚡ Now, ⏭ After and 🗑 Cancel (issue
30), through the real Telegram library against the fake Bot API: each button does what it says, the
acknowledgement is edited to say what became of the message, a press after the message was read
changes nothing and says at which step it was read, and with no press the message is folded in at
the next step as before (``agent.queued_default: after`` keeps it for the next turn instead)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_turn_control import ALLOW_SHELL, start_waiting_command
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

NOTED = "Noted — I'll read this at my next step"


def _said(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"])


async def _queued(rig: Rig, text: str, ack: str = NOTED) -> SentMessage:
    """``text`` sent while the turn works: its acknowledgement, with the three buttons."""
    rig.say(text)
    noted = await rig.wait_text(ack)
    assert [label for row in noted.buttons for label, _ in row] == ["⚡ Now", "⏭ After", "🗑 Cancel"]
    return noted


def _press(rig: Rig, ack: SentMessage, label: str, *, require_button: bool = True) -> None:
    data = ack.button_data(label)
    rig.tg.press_button(ALLOWED_USER, ack.message_id, data, require_button=require_button)


async def _edited_to(rig: Rig, ack: SentMessage, needle: str) -> SentMessage:
    await rig.tg.wait_for(lambda: needle in rig.tg.message(ALLOWED_USER, ack.message_id).visible_text)
    edited = rig.tg.message(ALLOWED_USER, ack.message_id)
    assert edited.buttons == [], "a settled acknowledgement keeps no buttons"
    return edited


async def test_with_no_press_the_message_is_folded_in_and_its_acknowledgement_says_at_which_step(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("Both done."))
        ack = await _queued(rig, "ALSO check the logs")
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        await _edited_to(rig, ack, "Folded in at step 2.")
        assert "ALSO check the logs" in _said(rig.llm.requests[1])


async def test_now_stops_the_turn_and_starts_on_the_message_within_three_seconds(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the long thing")
        ack = await _queued(rig, "forget it, say hi instead")
        rig.llm.script(Text("Hi!"))
        pressed = time.monotonic()
        _press(rig, ack, "⚡ Now")
        await rig.llm.wait_for_requests(2, timeout=10)
        assert time.monotonic() - pressed < 3.0, "the new turn did not start within 3 s"
        await rig.wait_text("Hi!")
        await _edited_to(rig, ack, "Stopping to start on this now.")
        second = rig.llm.requests[1]
        assert [m["content"] for m in second["messages"] if m["role"] == "user"][-1] == (
            "forget it, say hi instead"
        )
        assert not (rig.workdir / "go").exists()  # the command was stopped, not released
        assert not any("Stopped" in t for t in rig.texts()), "a steer is not a /stop"


async def test_after_keeps_the_message_out_of_the_running_turn_and_runs_it_next(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("First done."))
        ack = await _queued(rig, "then summarise it")
        _press(rig, ack, "⏭ After")
        await _edited_to(rig, ack, "Will run next")
        rig.llm.script(Text("Here is the summary."))
        (rig.workdir / "go").touch()
        await rig.wait_turns(2)
        await rig.wait_text("Here is the summary.")
        first_turn, second_turn = rig.llm.requests[1], rig.llm.requests[2]
        assert "then summarise it" not in _said(first_turn)  # not folded into the running turn
        users = [m["content"] for m in second_turn["messages"] if m["role"] == "user"]
        assert users[-1] == "then summarise it"


async def test_cancel_drops_the_message_unread(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("Done."))
        ack = await _queued(rig, "oops, wrong chat")
        _press(rig, ack, "🗑 Cancel")
        await _edited_to(rig, ack, "Cancelled")
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        await rig.wait_text("Done.")
        assert rig.llm.calls == 2, "no turn for the dropped message"
        assert not any("oops" in _said(r) for r in rig.llm.requests)


async def test_a_press_after_the_message_was_read_changes_nothing_and_says_at_which_step(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("Both done."))
        ack = await _queued(rig, "and the logs")
        now = ack.button_data("⚡ Now")  # as a slow client still shows it
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        await _edited_to(rig, ack, "Folded in at step 2.")
        answers = len(rig.tg.callback_answers)
        rig.tg.press_button(ALLOWED_USER, ack.message_id, now, require_button=False)
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) > answers)
        assert rig.tg.callback_answers[-1].text == "Already read at step 2 — nothing changed."
        assert rig.llm.calls == 2, "nothing started, nothing stopped"


async def test_queued_default_after_holds_a_message_for_the_next_turn_without_a_press(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL, agent={"queued_default": "after"}) as rig:
        await start_waiting_command(rig, "run the thing", Text("First done."), Text("Second done."))
        await _queued(rig, "then this", ack="I'll start on this once I finish")
        (rig.workdir / "go").touch()
        await rig.wait_turns(2)
        assert "then this" not in _said(rig.llm.requests[1])
        assert [m["content"] for m in rig.llm.requests[2]["messages"] if m["role"] == "user"][
            -1
        ] == "then this"


async def test_now_on_a_message_sent_while_a_call_waits_for_approval_starts_on_it(tmp_path: Path) -> None:
    """The note that points at the pending prompt carries the buttons too: ⚡ stops the turn that
    waits (its prompt is cancelled, nothing runs) and starts on the message."""
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "touch ran"})]), Text("Hi instead!"))
        rig.say("run it")
        await rig.wait_text("Approval needed")
        ack = await _queued(rig, "no, just say hi", ack="my next step waits for your decision")
        _press(rig, ack, "⚡ Now")
        await rig.wait_text("Hi instead!")
        await _edited_to(rig, ack, "Stopping to start on this now.")
        assert [m["content"] for m in rig.llm.requests[1]["messages"] if m["role"] == "user"][-1] == (
            "no, just say hi"
        )
        assert not (rig.workdir / "ran").exists(), "the call that waited was not run"
