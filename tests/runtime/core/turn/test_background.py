"""Tracked calls (issue 14): a slow command detaches, its result comes as mail, the model's call tools.

The real runtime, the real openai SDK against the fake endpoint, real shell commands.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.events import CallDetached, CallFinished, TurnFinished
from agentgram.runtime.infra.storage.background_rows import BackgroundStore, RunStatus
from agentgram.runtime.infra.storage.models import ToolCallStatus
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder, started_runtime

ALLOW_SHELL = {"rules": [{"tool": "execute_cmd", "action": "allow"}]}


def settings(tmp_path: Path, llm: FakeOpenAI, **tools: Any) -> Any:
    return make_settings(tmp_path, llm.base_url, tools={"attach_seconds": 1, **tools}, approval=ALLOW_SHELL)


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def last_user(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def finished(rec: Recorder) -> list[TurnFinished]:
    return [e for e in rec.events if isinstance(e, TurnFinished)]


async def turns(rec: Recorder, count: int, timeout: float = 15.0) -> list[TurnFinished]:
    await rec.wait_for(lambda: len(finished(rec)) >= count, timeout)
    return finished(rec)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


async def chat(runtime: Runtime, text: str, envelope: str = "u1") -> Any:
    session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
    await runtime.chat.post_user_message(session, text, envelope_id=envelope)
    return session


async def test_a_slow_command_detaches_the_turn_goes_on_and_its_result_wakes_the_idle_chat(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 3; echo built"}, id="call_build")]),
        Text("Still building; I will tell you when it is done."),
        Text("The build is done: built."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "build it")
        first = (await turns(rec, 1))[0]
        assert first.text == "Still building; I will tell you when it is done."
        [placeholder] = tool_results(fake_llm.requests[1])
        assert json.loads(placeholder) == {
            "status": "running",
            "tool_call_id": "call_build",
            "detached": "still running after 1s",
            "message": "Its result will arrive as mail. Use wait, get_tool_call_status or cancel_tool_call.",
        }
        assert [e.kind for e in rec.events if isinstance(e, CallDetached | CallFinished)] == ["call_detached"]

        second = (await turns(rec, 2))[1]  # nobody wrote: the result itself started this turn
        assert second.text == "The build is done: built."
        mail = last_user(fake_llm.requests[2])
        assert mail.startswith("[mail call-finished-")
        assert "tool call call_build (execute_cmd) completed]" in mail
        assert "built" in mail and "exit code: 0" in mail
        [done] = [e for e in rec.events if isinstance(e, CallFinished)]
        assert done.status == RunStatus.COMPLETED and done.summary == "sleep 3; echo built"
        call = await runtime.parts.history.call_by_model_id(first.to.session_id, "call_build")
        assert call is not None and call.status == ToolCallStatus.DETACHED and call.result == placeholder
    finally:
        await runtime.close()


async def test_a_call_done_within_the_attach_window_is_an_ordinary_result(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo quick"})]), Text("quick it was"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "go")
        await turns(rec, 1)
        [result] = tool_results(fake_llm.requests[1])
        assert result == "quick\nexit code: 0"
        assert not [e for e in rec.events if isinstance(e, CallDetached)]
        assert runtime.parts.background.running() == []
    finally:
        await runtime.close()


async def test_wait_on_a_call_returns_its_result_and_the_mail_then_reads_already_read(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 2; echo tests passed"}, id="call_t")]),
        ToolCalls([Call("wait", {"for": ["call_t"], "timeout_seconds": 20})]),
        Text("All tests passed."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "run the tests")
        [turn] = await turns(rec, 1)
        assert turn.text == "All tests passed."
        woke = json.loads(tool_results(fake_llm.requests[2])[-1])
        assert woke["woken_by"] == "call" and woke["still_running"] == []
        [call] = woke["calls"]
        assert call["status"] == "completed" and "tests passed" in call["result"]
        folded = last_user(fake_llm.requests[2])
        assert folded.endswith(
            "tool call call_t (execute_cmd) completed; its result was already read with get_tool_call_status]"
        )
        await asyncio.sleep(0.3)
        assert len(finished(rec)) == 1  # the mail was read inside the turn: nothing woke the chat again
    finally:
        await runtime.close()


async def test_wait_for_mail_wakes_on_the_users_message_and_times_out_at_the_cap(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("wait", {"for": "mail", "timeout_seconds": 30})]),
        ToolCalls([Call("wait", {"for": "mail", "timeout_seconds": 600})]),
        Text("ok"),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, max_wait_seconds=0.5))
    try:
        session = await chat(runtime, "wait for me")
        await rec.wait_for(lambda: len(fake_llm.requests) >= 1)
        await asyncio.sleep(0.2)
        await runtime.chat.post_user_message(session, "here I am", envelope_id="u2")
        started = asyncio.get_running_loop().time()
        await turns(rec, 1)
        took = asyncio.get_running_loop().time() - started
        first, second = (json.loads(r) for r in tool_results(fake_llm.requests[2]))
        assert first["woken_by"] == "mail" and first["mail"][0]["kind"] == "user_message"
        assert second == {"woken_by": "timeout"}  # 600 s asked, capped at 0.5 s
        assert took < 5
    finally:
        await runtime.close()


async def test_status_shows_progress_and_cancel_kills_the_whole_process_group(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    pidfile = tmp_path / "workspace" / "child.pid"
    command = "echo started; sleep 60 & echo $! > child.pid; wait"
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": command}, id="call_srv")]),
        ToolCalls([Call("get_tool_call_status", {"tool_call_id": "call_srv"})]),
        ToolCalls([Call("cancel_tool_call", {"tool_call_id": "call_srv", "reason": "not needed"})]),
        ToolCalls([Call("list_running_tool_calls")]),
        Text("Cancelled it."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "start it")
        [turn] = await turns(rec, 1)
        assert turn.text == "Cancelled it."
        status, cancel, listing = (json.loads(r) for r in tool_results(fake_llm.requests[4])[1:])
        assert status["status"] == "running" and status["detached"] is True
        assert "started" in status["recent_output"]
        assert cancel == {"tool_call_id": "call_srv", "cancelled": True, "previous_status": "running"}
        assert listing == {"running": []}
        child = int(pidfile.read_text())
        for _ in range(50):
            if not alive(child):
                break
            await asyncio.sleep(0.05)
        assert not alive(child)
        row = await BackgroundStore(runtime.parts.db).latest(turn.to.session_id, "call_srv")
        assert row is not None and row.status == RunStatus.CANCELLED and "not needed" in (row.result or "")
    finally:
        await runtime.close()


async def test_stop_cancels_the_sessions_running_calls_without_waking_it(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 60"}, id="call_long")]),
        Text("It runs in the background."),
        Text("Noted."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await chat(runtime, "start")
        await turns(rec, 1)
        assert [c.call_id for c in runtime.calls.running_calls(session)] == ["call_long"]
        stopped = await runtime.chat.stop(session, "s1")
        assert stopped.was_running
        await rec.wait_kind("call_finished")
        assert runtime.calls.running_calls(session) == []
        await rec.wait_kind("notice")
        assert [n.key for n in rec.of("notice")] == ["stopped"]  # not "nothing to stop": a call was
        await asyncio.sleep(0.3)
        assert len(finished(rec)) == 1  # the user stopped it: no turn to report it
        await runtime.chat.post_user_message(session, "what happened?", envelope_id="u2")
        await turns(rec, 2)
        text = "\n".join(m["content"] or "" for m in fake_llm.requests[2]["messages"] if m["role"] == "user")
        assert "tool call call_long (execute_cmd) cancelled]" in text and "/stop" in text
    finally:
        await runtime.close()


async def test_the_chats_stop_button_cancels_one_call(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 60"}, id="call_x")]),
        Text("Running."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await chat(runtime, "start")
        await turns(rec, 1)
        [running] = runtime.calls.running_calls(session)
        other = await runtime.chat.chat_session(2002, user_id=2002, language="en")
        assert not await runtime.calls.cancel_call(
            other, running.run_id, envelope_id="tap-1"
        )  # not that chat's call
        assert await runtime.calls.cancel_call(session, running.run_id, envelope_id="tap-2")
        await rec.wait_kind("call_finished")
        assert not await runtime.calls.cancel_call(
            session, running.run_id, envelope_id="tap-3"
        )  # gone already
        [done] = [e for e in rec.events if isinstance(e, CallFinished)]
        assert done.status == RunStatus.CANCELLED
    finally:
        await runtime.close()


async def test_after_a_restart_a_detached_call_is_orphaned_and_the_agent_is_told(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 60"}, id="call_orph")]),
        Text("Started."),
    )
    config = settings(tmp_path, fake_llm)
    runtime, rec = await started_runtime(config)
    try:
        await chat(runtime, "start")
        [turn] = await turns(rec, 1)
    finally:
        await runtime.close()
    fake_llm.script(
        ToolCalls([Call("get_tool_call_status", {"tool_call_id": "call_orph"})]),
        Text("The restart killed it; shall I start it again?"),
    )
    runtime, rec = await started_runtime(config)
    try:
        [told] = await turns(rec, 1)
        assert told.text == "The restart killed it; shall I start it again?"
        assert "tool call call_orph (execute_cmd) orphaned]" in last_user(fake_llm.requests[2])
        status = json.loads(tool_results(fake_llm.requests[3])[-1])
        assert status["status"] == "orphaned" and "restarted" in status["result"]
        row = await BackgroundStore(runtime.parts.db).latest(turn.to.session_id, "call_orph")
        assert row is not None and row.status == RunStatus.ORPHANED
    finally:
        await runtime.close()


async def test_status_can_wait_for_completion_and_the_call_tools_need_no_approval(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """Only execute_cmd is allowed by the test's rule: the four call tools pass by the seeded rules."""
    fake_llm.script(
        ToolCalls([Call("execute_cmd", {"command": "sleep 1.5; echo finally"}, id="call_w")]),
        ToolCalls(
            [
                Call(
                    "get_tool_call_status",
                    {"tool_call_id": "call_w", "wait_for_completion": True, "timeout_seconds": 20},
                )
            ]
        ),
        Text("Done at last."),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "go")
        [turn] = await turns(rec, 1)
        assert turn.text == "Done at last."
        status = json.loads(tool_results(fake_llm.requests[2])[-1])
        assert status["status"] == "completed" and "finally" in status["result"]
        assert not rec.of("approval_requested")
        assert "already read" in last_user(fake_llm.requests[2])
    finally:
        await runtime.close()


async def test_an_unknown_call_id_is_an_error_the_model_reads(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        ToolCalls(
            [Call("get_tool_call_status", {"tool_call_id": "call_nope"}), Call("wait", {"for": "any-call"})]
        ),
        Text("ok"),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await chat(runtime, "go")
        await turns(rec, 1)
        unknown, nothing = tool_results(fake_llm.requests[1])
        assert "no tool call 'call_nope' in this session" in unknown
        assert "nothing to wait for" in nothing
    finally:
        await runtime.close()
