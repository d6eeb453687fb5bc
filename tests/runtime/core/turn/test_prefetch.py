"""A new turn's first request goes out while the turn is being opened (runtime/turn/prefetch.py):
the round adopts it only if it asked exactly what the round would ask, a stop while the turn
is being opened cancels it, and a turn that failed before replying does not spoil it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.core.turn import steps
from agentgram.runtime.core.turn.loop import TurnRunner
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.infra.events import Address, OutcomeKind, TurnFinished
from agentgram.runtime.infra.llm.types import SystemMessage, UserMessage
from agentgram.runtime.infra.storage.models import Role
from tests.conftest import make_settings
from tests.fakes.openai_server import Error, FakeOpenAI, Hang, Text
from tests.runtime.core.turn.harness import started_runtime


def count_adoptions(monkeypatch: pytest.MonkeyPatch) -> list[Prefetch]:
    """Which prefetched requests a round adopted (the real ``adopt`` runs)."""
    adopted: list[Prefetch] = []
    adopt = Prefetch.adopt

    async def counted(self: Prefetch, sink: Any) -> Any:
        adopted.append(self)
        return await adopt(self, sink)

    monkeypatch.setattr(Prefetch, "adopt", counted)
    return adopted


async def test_the_first_round_adopts_the_request_sent_while_the_turn_opened(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    adopted = count_adoptions(monkeypatch)
    fake_llm.script(Text("Hi!"), Text("Fine."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "hello", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        assert len(adopted) == 1 and fake_llm.calls == 1, "the prefetched request was the turn's request"
        await runtime.chat.post_user_message(session, "how are you?", envelope_id="u2")
        await rec.wait_kind("turn_finished", 2)
        assert len(adopted) == 2 and fake_llm.calls == 2
        assert fake_llm.closed_streams == 0
        contents = [m["content"] for m in fake_llm.requests[1]["messages"][1:-1]]
        assert contents == ["hello", "Hi!", "how are you?"]
    finally:
        await runtime.close()


async def test_a_turn_that_failed_unanswered_does_not_spoil_the_next_prefetch(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    adopted = count_adoptions(monkeypatch)
    fake_llm.script(Error(400, "bad request"), Text("Now it works."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url, llm={"max_retries": 0}))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "first", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        await runtime.chat.post_user_message(session, "second", envelope_id="u2")
        await rec.wait_kind("turn_finished", 2)
        outcomes = [e.outcome for e in rec.of("turn_finished") if isinstance(e, TurnFinished)]
        assert outcomes == [OutcomeKind.FAILED, OutcomeKind.FINAL]
        assert fake_llm.calls == 2 and len(adopted) == 2, (
            "the unanswered 'first' was left out, as the opening does"
        )
        assert [m["content"] for m in fake_llm.requests[1]["messages"][1:-1]] == ["second"]
    finally:
        await runtime.close()


async def test_a_request_that_asked_something_else_is_cancelled_and_asked_again(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    fake_llm.script(Hang(first_text="stale", seconds=30), Text("fresh"))
    runtime, _ = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        ref = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        session = await runtime.parts.session_store.get(ref.id)
        assert session is not None
        services = runtime.parts.hub.deps
        runner = TurnRunner.root(services, session, 0, Address.of(session))
        asked = [SystemMessage("s"), UserMessage("what the history said a moment ago")]
        prefetch = Prefetch(runtime.parts.llm, asked, runner.tools.specs(), services.clock())
        await fake_llm.wait_for_requests(1)
        result = await runner.call_model([SystemMessage("s"), UserMessage("now")], prefetch)
        assert result.text == "fresh"
        await fake_llm.wait_stream_closed()
        assert fake_llm.calls == 2
    finally:
        await runtime.close()


async def test_a_stop_while_the_turn_is_opened_starts_it_cancelled(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.script(Text("warmed up"), Hang(first_text="never shown", seconds=30))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
    await runtime.chat.post_user_message(session, "warm up", envelope_id="u0")
    await rec.wait_kind("turn_finished")
    opening, go_on = asyncio.Event(), asyncio.Event()
    open_turn = steps.open_turn

    async def slow_open(services: Any, session_id: int, mail: Any, prepared: Any = None) -> int:
        opening.set()
        await go_on.wait()  # the stop arrives in this window
        return await open_turn(services, session_id, mail, prepared)

    monkeypatch.setattr(steps, "open_turn", slow_open)
    try:
        await runtime.chat.post_user_message(session, "start", envelope_id="u1")
        await opening.wait()
        await fake_llm.wait_for_requests(2)  # the prefetched request is already out
        assert runtime.parts.hub.is_busy(session.id or 0), "a turn being opened counts as running"
        stopped = await runtime.chat.stop(session, "stop-1")
        assert stopped.was_running
        go_on.set()
        await rec.wait_kind("turn_finished", 2)
        finished = rec.of("turn_finished")[1]
        assert isinstance(finished, TurnFinished) and finished.outcome == OutcomeKind.CANCELLED
        await fake_llm.wait_stream_closed()
        assert fake_llm.calls == 2
        rows = await runtime.parts.history.all_rows(session.id or 0)
        assert [(r.role, r.content) for r in rows][2:] == [(Role.USER, "start")]
        await rec.wait_kind("notice")
    finally:
        await runtime.close()
