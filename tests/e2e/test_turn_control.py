"""Messages while the agent works, /stop, /pause and /resume — through the real bot and both fakes.

A tool that must still be running when the test acts waits for a ``go`` file the
test creates (:data:`WAIT_FOR_GO`), so "while a tool runs" is a fact, not a race.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

from agentgram.runtime.core.mailbox import (
    ControlAction,
    ControlBody,
    Envelope,
    Priority,
    Sender,
    SenderKind,
    SqlMailbox,
)
from agentgram.runtime.core.turn.loop import TurnRunner
from agentgram.runtime.infra.events import (
    Notice,
    OutcomeKind,
    ToolActivity,
    ToolPhase,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    Role,
    RowStatus,
    ToolCallStatus,
    Turn,
    TurnStatus,
)
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.conftest import ALLOWED_USER, also_on_postgres
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder

ALLOW_SHELL = {"rules": [{"tool": "execute_cmd", "action": "allow"}]}
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"
STOP_LATENCY_LIMIT = 1.0
T = TypeVar("T")


# --- helpers -----------------------------------------------------------------------------------


def recorder(rig: Rig) -> Recorder:
    assert isinstance(rig._recorder, Recorder)
    return rig._recorder


async def wait_tool_running(rig: Rig) -> None:
    def running() -> bool:
        return any(isinstance(e, ToolActivity) and e.phase == ToolPhase.RUNNING for e in recorder(rig).events)

    await recorder(rig).wait_for(running)


async def start_waiting_command(rig: Rig, text: str, *replies: Reply) -> None:
    """The user says ``text``; the model runs a command that waits for the file ``go``, then ``replies``."""
    rig.llm.script(ToolCalls([("execute_cmd", {"command": WAIT_FOR_GO})]), *replies)
    rig.say(text)
    await wait_tool_running(rig)


async def pause(rig: Rig) -> None:
    rig.say("/pause")
    await rig.wait_text("⏸ I'll pause")


def finished(rig: Rig) -> list[TurnFinished]:
    return [e for e in recorder(rig).events if isinstance(e, TurnFinished)]


def started(rig: Rig) -> list[TurnStarted]:
    return [e for e in recorder(rig).events if isinstance(e, TurnStarted)]


async def session_of(rig: Rig) -> ChatSession:
    return await rig.bot.runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")


async def turns(rig: Rig) -> list[Turn]:
    from sqlmodel import col, select

    async with rig.bot.runtime.parts.db.read() as tx:
        return list((await tx.exec(select(Turn).order_by(col(Turn.id)))).all())


async def user_rows(rig: Rig) -> list[str]:
    session = await session_of(rig)
    rows = await rig.bot.runtime.parts.history.all_rows(session.id or 0)
    return [r.content for r in rows if r.role == Role.USER]


def roles(request: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request["messages"]]


def count_texts(rig: Rig, needle: str) -> int:
    return sum(needle in text for text in rig.texts())


async def eventually(
    probe: Callable[[], Awaitable[T]], check: Callable[[T], bool], timeout: float = 5.0
) -> None:
    """Poll an async probe (database state has no change event) until ``check`` holds."""
    deadline = time.monotonic() + timeout
    while not check(value := await probe()):
        assert time.monotonic() < deadline, f"still {value!r} after {timeout} s"
        await asyncio.sleep(0.01)


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


async def shell_of(rig: Rig, command: str) -> psutil.Process:
    """The ``/bin/sh -c command`` this test process started."""
    found: list[psutil.Process] = []

    def spawned() -> bool:
        found[:] = [
            child
            for child in psutil.Process().children()
            if child.cmdline()[-1:] == [command] and Path(child.cwd()) == rig.workdir
        ]
        return bool(found)

    await rig.tg.wait_for(spawned)
    return found[0]


# --- mid-turn injection ------------------------------------------------------------------------


async def test_message_sent_while_a_tool_runs_is_read_after_its_result_in_the_same_turn(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("Both done."))

        rig.say("ALSO check /var/log")
        noted = await rig.wait_text("Noted — I'll read this at my next step")
        assert noted.reply_to_message_id is not None
        assert rig.tg.reactions[(ALLOWED_USER, noted.reply_to_message_id)] == [
            {"type": "emoji", "emoji": "👀"}
        ]
        (rig.workdir / "go").touch()
        await rig.wait_turns()

        assert rig.llm.calls == 2
        first, second = rig.llm.requests
        assert "ALSO" not in str(first["messages"])
        assert roles(second) == ["system", "user", "assistant", "tool", "user", "system"]
        assert "released" in second["messages"][3]["content"]
        assert second["messages"][4] == {"role": "user", "content": "ALSO check /var/log"}
        assert len(started(rig)) == len(finished(rig)) == 1, "no extra turn"
        assert finished(rig)[0].outcome == OutcomeKind.FINAL
        assert len(await turns(rig)) == 1
        assert await user_rows(rig) == ["run the thing", "ALSO check /var/log"]
        assert rig.texts()[-1] == "Both done."
        rig.llm.assert_complete()


async def test_several_messages_while_busy_are_kept_apart_but_read_as_one_user_turn(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "start", Text("ok"))
        rig.say("one")
        rig.say("two")
        await rig.tg.wait_for(lambda: count_texts(rig, "Noted") == 2)
        (rig.workdir / "go").touch()
        await rig.wait_turns()

        second = rig.llm.requests[1]
        assert roles(second) == ["system", "user", "assistant", "tool", "user", "system"]
        assert second["messages"][4]["content"] == "one\n\ntwo"
        assert await user_rows(rig) == ["start", "one", "two"]
        assert len(started(rig)) == 1


async def test_a_message_after_the_last_boundary_starts_the_next_turn(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("first answer", chunk_size=4, delay=0.05), Text("second answer"))
        rig.say("first")
        await rig.llm.wait_for_requests(1)
        rig.say("second")
        await rig.wait_turns(2)

        assert [t.status for t in await turns(rig)] == [TurnStatus.FINAL, TurnStatus.FINAL]
        assert rig.llm.requests[1]["messages"][-2] == {"role": "user", "content": "second"}
        assert "second" not in str(rig.llm.requests[0]["messages"])


async def test_a_full_mailbox_refuses_and_says_so(tmp_path: Path) -> None:
    async with running_bot(tmp_path, mailbox={"max_unread": 1}) as rig:
        rig.llm.script(Hang(first_text="Working", seconds=30))
        rig.say("start")
        await rig.llm.wait_for_requests(1)
        rig.say("queued")
        await rig.wait_text("Noted")
        rig.say("one too many")
        await rig.wait_text("Too many unread messages")
        rig.say("/stop")
        await rig.wait_text("1 queued message was dropped")
        assert "one too many" not in str(await user_rows(rig))


# --- /stop ---------------------------------------------------------------------------------------


async def test_stop_during_a_streaming_llm_call_closes_the_stream_at_once(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Hang(first_text="Let me think about", seconds=30))
        rig.say("write an essay")
        await rig.tg.wait_for(lambda: rig.drafted("Let me think about"))

        sent_at = time.monotonic()
        rig.say("/stop")
        await rig.llm.wait_stream_closed(timeout=STOP_LATENCY_LIMIT * 3)
        latency = time.monotonic() - sent_at
        assert latency < STOP_LATENCY_LIMIT, f"/stop took {latency:.3f} s to close the LLM stream"

        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.CANCELLED]
        assert [t.status for t in await turns(rig)] == [TurnStatus.CANCELLED]
        session = await session_of(rig)
        rows = await rig.bot.runtime.parts.history.all_rows(session.id or 0)
        assert [(r.role, r.status) for r in rows] == [
            (Role.USER, RowStatus.OK),
            (Role.ASSISTANT, RowStatus.CANCELLED),
        ], "what streamed before /stop is kept, marked cancelled"
        assert count_texts(rig, "⏹ Stopped.") == 1
        assert rig.llm.calls == 1


@also_on_postgres
async def test_stop_kills_a_running_command_and_its_process_group(tmp_path: Path) -> None:
    command = "sleep 30; touch marker"
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": command})]))
        rig.say("nap for a while")
        await wait_tool_running(rig)
        shell = await shell_of(rig, command)
        pgid = os.getpgid(shell.pid)
        await rig.tg.wait_for(lambda: len(group_members(pgid)) >= 2)  # sh and sleep

        sent_at = time.monotonic()
        rig.say("/stop")
        await rig.tg.wait_for(lambda: not group_members(pgid), timeout=STOP_LATENCY_LIMIT * 3)
        latency = time.monotonic() - sent_at
        assert latency < STOP_LATENCY_LIMIT, f"the process group lived {latency:.3f} s after /stop"

        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns()
        assert not (rig.workdir / "marker").exists()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.CANCELLED]
        session = await session_of(rig)
        calls = [c for e in await rig.bot.runtime.parts.history.entries(session.id or 0) for c in e.calls]
        assert [(c.status, c.result) for c in calls] == [(ToolCallStatus.CANCELLED, "Cancelled by user.")]
        assert "⏹" in next(t for t in rig.texts() if "execute_cmd" in t)

        rig.llm.script(Text("It was stopped."))
        rig.say("what happened?")
        await rig.wait_turns(2)
        request = rig.llm.requests[-1]
        assert roles(request) == ["system", "user", "assistant", "tool", "user", "system"]
        assert request["messages"][3] == {
            "role": "tool",
            "tool_call_id": calls[0].call_id,
            "content": "Cancelled by user.",
        }


async def test_stop_drops_queued_messages_and_says_how_many(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Hang(first_text="Working", seconds=30))
        rig.say("start")
        await rig.llm.wait_for_requests(1)
        rig.say("queued one")
        rig.say("queued two")
        await rig.tg.wait_for(lambda: count_texts(rig, "Noted") == 2)

        rig.say("/stop")
        await rig.wait_text("2 queued messages were dropped")
        await rig.wait_turns()
        assert await user_rows(rig) == ["start"], "dropped mail is never stored as a turn"
        assert count_texts(rig, "⏹ Stopped.") == 1, "one stop reply, with the count"
        session = await session_of(rig)
        assert await rig.bot.runtime.parts.mailbox.unread(session.id or 0) == []

        rig.llm.script(Text("fresh"))
        rig.say("next")
        await rig.wait_turns(2)
        conversation = rig.llm.requests[-1]["messages"][1:-1]
        assert conversation == [
            {"role": "user", "content": "start"},
            {"role": "assistant", "content": "Working\n\n[stopped by the user]"},
            {"role": "user", "content": "next"},
        ], "the stopped request stays in context; the dropped messages never enter it"
        assert rig.texts()[-1] == "fresh"


async def test_a_stop_mail_that_lands_before_the_cancel_ends_the_turn_at_its_next_step(
    tmp_path: Path,
) -> None:
    """The stop mail is stored before the turn is cancelled: a round boundary in between
    must neither inject the queued message nor carry on."""
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "start")
        rig.say("queued")
        await rig.wait_text("Noted")
        session = await session_of(rig)
        runtime = rig.bot.runtime
        runtime.parts.desk.handle(
            ControlAction.STOP, lambda _envelope, _replayed: False
        )  # its cancel comes later
        stop = Envelope(
            id="stop-without-cancel",
            session_id=session.id,
            sender=Sender(kind=SenderKind.USER),
            priority=Priority.INTERRUPT,
            body=ControlBody(action=ControlAction.STOP),
        )
        await runtime.parts.mailbox.accept(stop)
        (rig.workdir / "go").touch()

        await rig.wait_text("1 queued message was dropped")
        await rig.wait_turns()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.CANCELLED]
        assert await user_rows(rig) == ["start"]
        assert rig.llm.calls == 1, "no LLM call after the stop"


async def test_a_cancel_during_the_stop_clean_up_does_not_kill_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a second cancel while the turn recorded its cancellation ended the turn
    task cancelled, which ended the session's consumer — the chat went silent."""
    original = TurnRunner._record_cancellation

    async def cancelled_again(self: TurnRunner) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # like a second /stop landing mid-clean-up
        await original(self)

    monkeypatch.setattr(TurnRunner, "_record_cancellation", cancelled_again)
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Hang(first_text="Working", seconds=30))
        rig.say("start")
        await rig.tg.wait_for(lambda: rig.drafted("Working"))
        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns()
        assert [t.status for t in await turns(rig)] == [TurnStatus.CANCELLED]

        rig.llm.script(Text("still here"))
        rig.say("hello?")
        await rig.wait_turns(2)
        assert rig.texts()[-1] == "still here"


async def test_a_stop_a_crash_left_unread_after_its_turn_was_cancelled_still_says_stopped(
    tmp_path: Path,
) -> None:
    """The previous process cancelled the turn and died before consuming the stop mail:
    after the restart the stop is settled with "⏹ Stopped.", not "Nothing to stop"."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'agentgram.db'}")
    await migrate(db)
    session = (await SessionStore(db).find_or_open(ALLOWED_USER, user_id=ALLOWED_USER, language="en"))[0]
    stop = Envelope(
        id="tg:41",
        session_id=session.id or 0,
        sender=Sender(kind=SenderKind.USER),
        body=ControlBody(action=ControlAction.STOP),
    )
    await SqlMailbox(db).accept(stop)
    async with db.write() as tx:
        tx.add(
            Turn(
                session_id=session.id or 0,
                status=TurnStatus.CANCELLED,
                ended_at=stop.sent_at + timedelta(seconds=0.2),
            )
        )
    await db.close()

    async with running_bot(tmp_path) as rig:  # (the fake has never seen the chat: watch the events)
        await recorder(rig).wait_kind("notice")
        mailbox = rig.bot.runtime.parts.mailbox
        await eventually(lambda: mailbox.unread(session.id or 0), lambda unread: unread == [])
        assert [e.key for e in recorder(rig).events if isinstance(e, Notice)] == ["stopped"]
        assert rig.llm.calls == 0


async def test_stop_with_nothing_running_says_so(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/stop")
        await rig.wait_text("Nothing to stop")
        assert not any("Stopped" in t for t in rig.texts())
        assert rig.llm.calls == 0


async def test_stop_cancels_a_pending_approval_and_edits_its_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "touch approved-marker"})]))
        rig.say("make a file")
        prompt = await rig.wait_text("Approval needed")

        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns()
        await rig.tg.wait_for(
            lambda: "Cancelled" in rig.tg.message(ALLOWED_USER, prompt.message_id).visible_text
        )
        assert not (rig.workdir / "approved-marker").exists()
        session = await session_of(rig)
        calls = [c for e in await rig.bot.runtime.parts.history.entries(session.id or 0) for c in e.calls]
        assert [(c.status, c.result) for c in calls] == [(ToolCallStatus.CANCELLED, "Cancelled by user.")]
        assert await rig.bot.runtime.parts.approval_manager.pending(session.id or 0) == []


async def test_new_while_running_stops_quietly(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Hang(first_text="Working", seconds=30))
        rig.say("start")
        await rig.llm.wait_for_requests(1)
        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        await rig.llm.wait_stream_closed()
        await rig.wait_turns()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.CANCELLED]
        assert not any("Nothing to stop" in t for t in rig.texts())


async def test_new_while_idle_does_not_say_nothing_to_stop(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        old = await session_of(rig)
        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        mailbox = rig.bot.runtime.parts.mailbox
        await eventually(lambda: mailbox.cursor(old.id or 0), lambda cursor: cursor == 1)
        rig.llm.script(Text("fresh start"))
        rig.say("hi")  # a whole turn in the new session: the old one has long settled
        await rig.wait_turns()
        assert rig.texts() == [
            "🆕 Fresh conversation started. I've forgotten our previous chat.",
            "fresh start",
        ]


# --- /pause and /resume -------------------------------------------------------------------------


async def test_pause_lets_the_tool_finish_then_resume_continues_the_same_turn(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "long job", Text("Finished after resume."))

        await pause(rig)
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.PAUSED]
        assert rig.llm.calls == 1, "paused at the round boundary, before the next LLM call"
        session = await session_of(rig)
        calls = [c for e in await rig.bot.runtime.parts.history.entries(session.id or 0) for c in e.calls]
        assert calls[0].status == ToolCallStatus.DONE and "released" in (calls[0].result or "")
        [paused] = await turns(rig)
        assert paused.status == TurnStatus.PAUSED

        rig.say("/resume")
        await rig.wait_text("Resuming")
        await rig.wait_turns(2)
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.PAUSED, OutcomeKind.FINAL]
        assert {s.turn_id for s in started(rig)} == {paused.id}
        assert {f.turn_id for f in finished(rig)} == {paused.id}
        [resumed] = await turns(rig)
        assert resumed.id == paused.id and resumed.status == TurnStatus.FINAL
        assert roles(rig.llm.requests[1]) == ["system", "user", "assistant", "tool", "system"]
        assert rig.texts()[-1] == "Finished after resume."


async def test_resume_before_the_pause_took_effect_cancels_it(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "long job", Text("Never paused."))
        await pause(rig)
        rig.say("/resume")
        await rig.wait_text("Resuming")
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.FINAL]
        assert rig.texts()[-1] == "Never paused."


async def test_a_message_while_paused_waits_for_resume_and_joins_the_same_turn(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "long job", Text("Done, with the note."))
        await pause(rig)
        (rig.workdir / "go").touch()
        await rig.wait_turns()

        rig.say("one more thing")
        await rig.tg.wait_for(lambda: count_texts(rig, "⏸ Paused") == 1)
        assert rig.llm.calls == 1, "a paused session does not start a turn on a message"

        rig.say("/resume")
        await rig.wait_turns(2)
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.PAUSED, OutcomeKind.FINAL]
        assert len(await turns(rig)) == 1
        second = rig.llm.requests[1]
        assert second["messages"][-2] == {"role": "user", "content": "one more thing"}
        assert rig.texts()[-1] == "Done, with the note."


async def test_resume_on_message_continues_the_paused_turn(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL, mailbox={"resume_on_message": True}) as rig:
        await start_waiting_command(rig, "long job", Text("Resumed by a message."))
        await pause(rig)
        (rig.workdir / "go").touch()
        await rig.wait_turns()

        rig.say("carry on")
        await rig.wait_turns(2)
        assert [f.outcome for f in finished(rig)] == [OutcomeKind.PAUSED, OutcomeKind.FINAL]
        assert len(await turns(rig)) == 1
        assert rig.llm.requests[1]["messages"][-2] == {"role": "user", "content": "carry on"}


async def test_stop_while_paused_ends_the_turn_cancelled(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "long job")
        await pause(rig)
        (rig.workdir / "go").touch()
        await rig.wait_turns()

        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        assert [t.status for t in await turns(rig)] == [TurnStatus.CANCELLED]
        rig.say("/resume")
        await rig.wait_text("Nothing to resume")
        assert rig.llm.calls == 1


async def test_pause_and_resume_with_nothing_to_act_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/pause")
        await rig.wait_text("Nothing to pause")
        rig.say("/resume")
        await rig.wait_text("Nothing to resume")
        assert rig.llm.calls == 0
