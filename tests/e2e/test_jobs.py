"""Long-running commands in the chat (issue 14, requirement 4): a detached call's live status line,
its ⏹ button, ``/jobs``, ``/stop``, and the line a restart cut short.

The real bot (python-telegram-bot) against the fake Bot API, the real openai SDK against the fake
endpoint, real shell commands. ``tools.attach_seconds: 1`` detaches a command after a second; a
command that must still run when the test acts waits for a ``go`` file (:data:`WAIT_FOR_GO`), so
"while it runs" is a fact, not a race.
"""

from __future__ import annotations

import html
import itertools
from pathlib import Path
from typing import Any

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.views.jobs_view import JOB
from tests.conftest import ALLOWED_USER, STRANGER
from tests.e2e.harness import Rig, fakes, running_bot
from tests.e2e.test_approvals import toast
from tests.e2e.test_turn_control import eventually
from tests.fakes.openai_server import Call, Reply, Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"
KEEPS_A_CHILD = "sleep 60 & echo $! > pid; wait"
INTERVAL = 2.0
CONFIG: dict[str, Any] = {
    "tools": {"attach_seconds": 1},
    "approval": {"rules": [{"tool": "execute_cmd", "action": "allow"}]},
    "telegram": {"job_status_interval": INTERVAL},
}


# --- helpers -----------------------------------------------------------------------------------


def first_text(message: SentMessage) -> str:
    return (message.edits[0] if message.edits else message.text) or ""


async def job_line(rig: Rig, command: str) -> SentMessage:
    """The live line of the detached ``command`` (as it is now)."""
    needle = f"⚙️ <code>{html.escape(command, quote=False)}</code> running · "

    def found() -> list[SentMessage]:
        return [m for m in rig.chat() if first_text(m).startswith(needle)]

    await rig.tg.wait_for(lambda: bool(found()), 10.0)
    (line,) = found()
    return line


def now(rig: Rig, line: SentMessage) -> SentMessage:
    return rig.tg.message(ALLOWED_USER, line.message_id)


async def reads(rig: Rig, line: SentMessage, text: str, timeout: float = 10.0) -> SentMessage:
    await rig.tg.wait_for(lambda: now(rig, line).visible_text.startswith(text), timeout)
    return now(rig, line)


def run(rig: Rig, command: str, *replies: Reply) -> None:
    rig.llm.script(ToolCalls([Call("execute_cmd", {"command": command})]), *replies)
    rig.say("run it")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


async def child_pid(rig: Rig) -> int:
    pid_file = rig.workdir / "pid"
    await rig.tg.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit())
    return int(pid_file.read_text())


def edits_of(rig: Rig, line: SentMessage) -> list[tuple[float, str]]:
    return [
        (r.time, str(r.params.get("text")))
        for r in rig.tg.calls("editMessageText")
        if str(r.params.get("message_id")) == str(line.message_id) and r.status == 200
    ]


def press(rig: Rig, line: SentMessage, label: str, user: int = ALLOWED_USER) -> int:
    return rig.tg.press_button(user, line.message_id, line.button_data(label), chat_id=ALLOWED_USER)


async def job_records(rig: Rig) -> dict[str, str]:
    return await rig.bot.runtime.values.values_with_prefix(JOB)


# --- the live line -------------------------------------------------------------------------------


async def test_a_detached_command_shows_a_ticking_line_that_ends_finished_before_the_agents_report(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, **CONFIG) as rig:
        run(rig, WAIT_FOR_GO, Text("Still running; I'll tell you."), Text("It is done: released."))
        line = await job_line(rig, WAIT_FOR_GO)
        assert line.visible_text.startswith(f"⚙️ {WAIT_FOR_GO} running · ")
        assert [label for row in line.buttons for label, _ in row] == ["⏹ Stop"]
        await rig.wait_turns(1)
        status = next(m for m in rig.chat() if m.visible_text.startswith("⚙️ execute_cmd"))
        assert status.visible_text == f"⚙️ execute_cmd · {WAIT_FOR_GO} ⏳", "the turn's line: detached"

        shown = line.visible_text
        await rig.tg.wait_for(lambda: now(rig, line).visible_text != shown, 3 * INTERVAL)  # a later time
        assert now(rig, line).visible_text.startswith(f"⚙️ {WAIT_FOR_GO} running · ")
        assert now(rig, line).buttons == line.buttons, "the ⏹ button stays while it runs"

        (rig.workdir / "go").touch()
        ended = await reads(rig, line, f"✅ {WAIT_FOR_GO} finished · ")
        assert ended.buttons == []
        await rig.wait_turns(2)  # the result mail started the agent's report
        texts = rig.texts()
        assert texts.count("Still running; I'll tell you.") == texts.count("It is done: released.") == 1
        assert texts.index("Still running; I'll tell you.") < texts.index("It is done: released.")
        assert texts[-1] == "It is done: released."

        edits = edits_of(rig, line)
        final_at = next(t for t, text in edits if "finished" in text)
        report_at = next(
            r.time for r in rig.tg.calls("sendMessage") if "It is done" in str(r.params.get("text"))
        )
        assert final_at < report_at, "the line reads finished before the report arrives"
        ticks = [t for t, text in edits if "running" in text]
        assert all(b - a >= INTERVAL * 0.9 for a, b in itertools.pairwise(ticks))
        assert await job_records(rig) == {}


async def test_stop_kills_the_command_and_the_line_reads_cancelled_a_strangers_press_does_nothing(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, **CONFIG) as rig:
        run(rig, KEEPS_A_CHILD, Text("It runs in the background."), Text("You stopped it."))
        line = await job_line(rig, KEEPS_A_CHILD)
        pid = await child_pid(rig)
        await rig.wait_turns(1)

        stop = line.button_data("⏹ Stop")
        rig.tg.add_chat(STRANGER)
        press(rig, line, "⏹ Stop", user=STRANGER)
        assert await toast(rig, 1) == "This button isn't for you."
        assert alive(pid) and now(rig, line).visible_text.startswith(f"⚙️ {KEEPS_A_CHILD} running")

        press(rig, line, "⏹ Stop")
        assert await toast(rig, 2) == "Stopping…"
        ended = await reads(rig, line, f"⏹ {KEEPS_A_CHILD} cancelled · ")
        assert ended.buttons == []
        await rig.tg.wait_for(lambda: not alive(pid))
        await rig.wait_turns(2)
        assert rig.texts()[-1] == "You stopped it."

        rig.tg.press_button(ALLOWED_USER, line.message_id, stop, require_button=False)  # a stale client
        assert await toast(rig, 3) == "That command is no longer running."
        for garbage in ("ag1:cc:nope", encode(Button(ButtonAction.CALL_CANCEL, "999999"))):
            rig.tg.press_button(ALLOWED_USER, line.message_id, garbage, require_button=False)
        assert await toast(rig, 5) == "That command is no longer running."
        assert rig.tg.callback_answers[3].text == "That command is no longer running."
        assert rig.tg.unanswered_callbacks() == []
        assert await job_records(rig) == {}


async def test_jobs_lists_a_running_command_with_its_button_and_says_none_when_none(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, **CONFIG) as rig:
        rig.say("/jobs")
        await rig.wait_text("No commands are running.")

        run(rig, KEEPS_A_CHILD, Text("Started it."), Text("Stopped, as you asked."))
        await job_line(rig, KEEPS_A_CHILD)
        pid = await child_pid(rig)
        await rig.wait_turns(1)
        rig.say("/jobs")
        listed = await rig.wait_text("Running commands")
        assert listed.visible_text.startswith(f"Running commands\n1. ⚙️ {KEEPS_A_CHILD} · ")
        assert f"<code>{html.escape(KEEPS_A_CHILD, quote=False)}</code>" in (listed.text or "")
        assert [label for row in listed.buttons for label, _ in row] == ["⏹ 1"]

        press(rig, listed, "⏹ 1")
        assert await toast(rig, 1) == "Stopping…"
        await rig.tg.wait_for(lambda: not alive(pid))
        await rig.wait_turns(2)
        rig.say("/jobs")
        await rig.tg.wait_for(lambda: rig.texts().count("No commands are running.") == 2)


async def test_slash_stop_cancels_the_detached_command_and_its_line_reads_cancelled(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, **CONFIG) as rig:
        run(rig, KEEPS_A_CHILD, Text("It runs in the background."))
        line = await job_line(rig, KEEPS_A_CHILD)
        pid = await child_pid(rig)
        await rig.wait_turns(1)
        rig.say("/stop")
        ended = await reads(rig, line, f"⏹ {KEEPS_A_CHILD} cancelled · ")
        assert ended.buttons == []
        await rig.tg.wait_for(lambda: not alive(pid))
        rig.say("/jobs")
        await rig.wait_text("No commands are running.")
        assert await job_records(rig) == {}


# --- restarts ------------------------------------------------------------------------------------


async def test_a_line_a_previous_process_left_reads_interrupted_after_the_next_start(
    tmp_path: Path,
) -> None:
    async with fakes() as chat:
        async with running_bot(tmp_path, on=chat, **CONFIG) as rig:
            run(rig, WAIT_FOR_GO, Text("It runs in the background."))
            line = await job_line(rig, WAIT_FOR_GO)
            await rig.wait_turns(1)
            assert list(await job_records(rig)), "the live line is recorded"
        chat[1].script(Text("The command was cut short by a restart."))
        async with running_bot(tmp_path, on=chat, **CONFIG) as rig:
            ended = await reads(rig, line, f"⚠️ {WAIT_FOR_GO} interrupted by a restart")
            assert ended.visible_text == f"⚠️ {WAIT_FOR_GO} interrupted by a restart"
            assert ended.buttons == []
            await rig.wait_turns(1)  # the orphaned result's mail: the agent tells the user
            assert rig.texts()[-1] == "The command was cut short by a restart."
            await eventually(lambda: job_records(rig), lambda found: found == {})
