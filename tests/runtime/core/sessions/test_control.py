"""Control reaches a session as stored mail (``runtime.core.sessions.control``).

A real runtime. The point of each test: whoever stores control mail in a session's mailbox (here
the test itself, standing in for another process or adapter) gets the same effect as the door's
method, because the desk acts on the mail once it is stored, not on a call into the worker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentgram.runtime.app import ApprovalStatus, Runtime, SessionRef
from agentgram.runtime.core.mailbox import (
    ApprovalDecisionBody,
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    Priority,
    Sender,
    SenderKind,
)
from agentgram.runtime.infra.events import ApprovalRequested, OutcomeKind
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.sessions.test_hub import ALLOW_SHELL, WAIT_FOR_GO, hub_rig


async def running(runtime: Runtime, session: SessionRef) -> None:
    """Until the session's shell call is running (its run is tracked: no event says so)."""
    for _ in range(500):  # 10 s
        if runtime.calls.running_calls(session):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the call never ran")


def control(session_id: int, body: MailBody, envelope_id: str) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER),
        priority=Priority.INTERRUPT,
        body=body,
    )


async def test_a_stop_stored_straight_into_the_mailbox_stops_the_running_turn(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": WAIT_FOR_GO})]), Text("never"))
    async with hub_rig(tmp_path, fake_llm, approval=ALLOW_SHELL) as rig:
        session = await rig.chat()
        await rig.runtime.chat.post_user_message(session, "wait for it", envelope_id="u1")
        await running(rig.runtime, session)
        stop = control(session.id, ControlBody(action=ControlAction.STOP), "stop-from-elsewhere")
        await rig.runtime.parts.mailbox.accept(stop)  # not Runtime.stop: only the mail
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        assert rig.finished()[0].outcome == OutcomeKind.CANCELLED
        assert rig.runtime.calls.running_calls(session) == [], "the stop's handler cancelled the call too"
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())


async def test_a_decision_stored_straight_into_the_mailbox_is_applied_and_the_turn_goes_on(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo hi"})]), Text("It said hi."))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        await rig.runtime.chat.post_user_message(session, "say hi", envelope_id="u1")
        await rig.rec.wait_kind("approval_requested")
        [asked] = [e for e in rig.rec.events if isinstance(e, ApprovalRequested)]
        body = ApprovalDecisionBody(request_id=asked.request_id, approved=True)
        await rig.runtime.parts.mailbox.accept(control(session.id, body, "decided-elsewhere"))
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        assert rig.finished()[0].text == "It said hi."
        request = await rig.runtime.parts.approval_manager.get(asked.request_id)
        assert request is not None and request.status == ApprovalStatus.APPROVED


async def test_a_redelivered_decision_is_applied_once(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo hi"})]), Text("It said hi."))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        await rig.runtime.chat.post_user_message(session, "say hi", envelope_id="u1")
        await rig.rec.wait_kind("approval_requested")
        [asked] = [e for e in rig.rec.events if isinstance(e, ApprovalRequested)]
        first = await rig.runtime.approvals.decide(
            asked.request_id, approved=True, reason=None, envelope_id="tap"
        )
        again = await rig.runtime.approvals.decide(
            asked.request_id, approved=False, reason=None, envelope_id="tap"
        )
        assert first.applied and first.status == ApprovalStatus.APPROVED
        assert not again.applied and again.status == ApprovalStatus.APPROVED, "the first decision stands"
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        assert rig.finished()[0].text == "It said hi."


async def test_every_control_command_reaches_the_session_as_mail(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """/pause, /resume, /model, /compact, a call's ⏹ and /stop: each is an envelope in the mailbox."""
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": WAIT_FOR_GO})]), Text("never"))
    seen: list[ControlAction] = []
    async with hub_rig(
        tmp_path,
        fake_llm,
        approval=ALLOW_SHELL,
        llm={"models": [{"name": "backup", "model": "backup-model"}]},
    ) as rig:
        rig.runtime.parts.mailbox.subscribe(
            lambda e: seen.append(e.body.action) if isinstance(e.body, ControlBody) else None
        )
        session = await rig.chat()
        assert await rig.runtime.sessions.choose_model(session, "backup") is not None
        assert (await rig.runtime.sessions.session_model(session)).name == "backup"
        await rig.runtime.chat.post_user_message(session, "wait for it", envelope_id="u1")
        await running(rig.runtime, session)
        [call] = rig.runtime.calls.running_calls(session)
        assert (await rig.runtime.chat.compact(session)).outcome.name == "OFF"  # off in tests: still mail
        assert await rig.runtime.chat.pause(session, "p1")
        assert await rig.runtime.chat.resume(session, "r1")
        assert await rig.runtime.calls.cancel_call(session, call.run_id, envelope_id="x1")
        assert (await rig.runtime.chat.stop(session, "s1")).was_running
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
    assert seen == [
        ControlAction.MODEL,
        ControlAction.COMPACT,
        ControlAction.PAUSE,
        ControlAction.RESUME,
        ControlAction.CANCEL_CALLS,
        ControlAction.STOP,
    ]
