"""ask_user_clarification through the facade with the scripted model: the answer is the tool result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agentgram.runtime.app import QuestionStatus, Runtime
from agentgram.runtime.core.turn.request import main_level
from agentgram.runtime.infra.events import QuestionAsked, QuestionResolved
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import ToolMessage
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource
from tests.conftest import make_settings
from tests.runtime.core.turn.harness import Recorder

CHAT = 1001
ASK = Call("ask_user_clarification", {"question": "Which database?", "options": ["prod", "staging"]})


@asynccontextmanager
async def runtime_with(tmp_path: Path, llm: ScriptedLLM) -> AsyncIterator[tuple[Runtime, Recorder]]:
    runtime = Runtime(make_settings(tmp_path, "http://127.0.0.1:9/v1"), llm=llm)
    recorder = Recorder()
    runtime.parts.bus.subscribe(recorder)
    await runtime.start()
    try:
        yield runtime, recorder
    finally:
        await runtime.close()


def tool_results(llm: ScriptedLLM, request: int) -> list[str]:
    return [m.content for m in llm.requests[request].messages if isinstance(m, ToolMessage)]


async def asked(recorder: Recorder, count: int = 1) -> QuestionAsked:
    await recorder.wait_kind("question_asked", count)
    event = recorder.of("question_asked")[count - 1]
    assert isinstance(event, QuestionAsked)
    return event


async def test_a_tapped_option_is_the_tool_result(tmp_path: Path) -> None:
    llm = ScriptedLLM.script(Round(calls=[ASK]), Round(text="Using staging."))
    async with runtime_with(tmp_path, llm) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        await runtime.chat.post_user_message(session, "check the db", envelope_id="u1")
        question = await asked(rec)
        assert question.options == ("prod", "staging") and question.question == "Which database?"
        assert runtime.approvals.waits_for_decision(session.id)  # no typing while the user is asked
        result = await runtime.approvals.answer_question(question.question_id, option=1, envelope_id="b1")
        assert result.applied and result.answer == "staging"
        await rec.wait_kind("turn_finished")
        assert tool_results(llm, 1) == ["staging"]
        again = await runtime.approvals.answer_question(question.question_id, option=0, envelope_id="b2")
        assert not again.applied and again.status == QuestionStatus.ANSWERED
        resolved = rec.of("question_resolved")
        assert [(e.status, e.answer) for e in resolved if isinstance(e, QuestionResolved)] == [
            (QuestionStatus.ANSWERED, "staging")
        ]


async def test_the_next_text_while_pending_is_the_answer_not_a_message(tmp_path: Path) -> None:
    llm = ScriptedLLM.script(Round(calls=[ASK]), Round(text="OK, the replica."))
    async with runtime_with(tmp_path, llm) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        assert not await runtime.approvals.answer_pending_question(session, "nothing asked", envelope_id="t0")
        await runtime.chat.post_user_message(session, "check the db", envelope_id="u1")
        await asked(rec)
        assert await runtime.approvals.answer_pending_question(session, "the read replica", envelope_id="t1")
        await rec.wait_kind("turn_finished")
        assert tool_results(llm, 1) == ["the read replica"]
        users = [m.content for m in llm.requests[1].messages if m.role == "user"]
        assert users == ["check the db"]  # the answer never became a user message
        assert not await runtime.approvals.answer_pending_question(session, "later text", envelope_id="t2")


async def test_a_newer_question_supersedes_the_older(tmp_path: Path) -> None:
    """Two questions of one session (parallel sub-agents may ask at once): the older is superseded."""
    async with runtime_with(tmp_path, ScriptedLLM.script()) as (runtime, _):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        first = await runtime.parts.questions.ask(session.id, 0, CHAT, "first?", [])
        second = await runtime.parts.questions.ask(session.id, 1, CHAT, "second?", [])
        assert [row.id for row in second.superseded] == [first.row.id]
        assert runtime.parts.questions.pending_in(session.id) == second.row.id
        stale = await runtime.approvals.answer_question(first.row.id, text="late", envelope_id="a1")
        assert not stale.applied and stale.status == QuestionStatus.SUPERSEDED


async def test_stop_cancels_the_pending_question(tmp_path: Path) -> None:
    llm = ScriptedLLM.script(Round(calls=[ASK]))
    async with runtime_with(tmp_path, llm) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        await runtime.chat.post_user_message(session, "check the db", envelope_id="u1")
        question = await asked(rec)
        await runtime.chat.stop(session, "s1")
        await rec.wait_kind("turn_finished")
        await rec.wait_kind("question_resolved")
        resolved = rec.of("question_resolved")[0]
        assert isinstance(resolved, QuestionResolved) and resolved.status == QuestionStatus.CANCELLED
        assert runtime.parts.questions.pending_in(session.id) is None
        late = await runtime.approvals.answer_question(question.question_id, option=0, envelope_id="b1")
        assert not late.applied and late.status == QuestionStatus.CANCELLED


async def test_a_pending_question_is_still_answerable_after_a_restart(tmp_path: Path) -> None:
    """The resumed turn re-runs the call, finds its question (not asked again) and takes its answer."""
    first = ScriptedLLM.script(Round(calls=[ASK]))
    async with runtime_with(tmp_path, first) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        await runtime.chat.post_user_message(session, "check the db", envelope_id="u1")
        question = await asked(rec)
        await runtime.approvals.question_shown(question.question_id, CHAT, 77)
    second = ScriptedLLM.script(Round(text="Staging it is."))
    async with runtime_with(tmp_path, second) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        assert runtime.parts.questions.pending_in(session.id) == question.question_id
        assert await runtime.approvals.answer_pending_question(session, "staging", envelope_id="t1")
        await rec.wait_kind("turn_finished")
        assert rec.of("question_asked") == []  # shown already: not asked again
        assert tool_results(second, 0) == ["staging"]


def test_headless_sessions_are_not_offered_the_question(tmp_path: Path) -> None:
    runtime = Runtime(make_settings(tmp_path, "http://127.0.0.1:9/v1"), llm=ScriptedLLM.script())
    chat = {
        spec.name
        for spec in main_level(runtime.parts.deps, ChatSession(source=SessionSource.CHAT)).tools.specs()
    }
    assert {"ask_user_clarification", "update_scratchpad", "write_todos"} <= chat
    for source in (SessionSource.TIC, SessionSource.CRON):
        names = {
            spec.name for spec in main_level(runtime.parts.deps, ChatSession(source=source)).tools.specs()
        }
        assert "ask_user_clarification" not in names and "write_todos" in names
