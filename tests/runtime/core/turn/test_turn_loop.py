"""Turn loop through the real openai SDK against the fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.infra.events import TurnFinished
from agentgram.runtime.infra.storage.models import ToolCallStatus
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import started_runtime


async def test_text_turn_streams_and_finishes(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("Hello there, friend!", chunk_size=5))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "hi", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        finished = rec.of("turn_finished")[0]
        assert isinstance(finished, TurnFinished) and finished.text == "Hello there, friend!"
        assert "".join(e.text for e in rec.of("text_delta")) == "Hello there, friend!"  # type: ignore[union-attr]
        request = fake_llm.requests[0]
        assert request["messages"][0]["role"] == "system"
        assert request["messages"][1] == {"role": "user", "content": "hi"}
        assert (
            request["messages"][-1]["role"] == "system"
            and "Europe/Berlin" in request["messages"][-1]["content"]
        )
    finally:
        await runtime.close()


async def test_tool_round_trip_pairs_history(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.md").write_text("buy milk\n")
    fake_llm.script(ToolCalls([("read_file", {"path": "notes.md"})]), Text("You need milk."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "what's in my notes?", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        second = fake_llm.requests[1]["messages"]
        roles = [m["role"] for m in second]
        assert roles == ["system", "user", "assistant", "tool", "system"]
        assert "buy milk" in second[3]["content"]
        entries = await runtime.parts.history.entries(session.id or 0)
        assert [c.status for e in entries for c in e.calls] == [ToolCallStatus.DONE]
    finally:
        await runtime.close()


async def test_reasoning_and_usage_are_stored_per_row(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("42", reasoning="let me think", usage=(120, 7)))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "answer?", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        rows = await runtime.parts.history.all_rows(session.id or 0)
        assistant = rows[-1]
        assert assistant.reasoning == "let me think"
        assert (assistant.input_tokens, assistant.output_tokens) == (120, 7)
        assert assistant.model == "main-model"
        assert "".join(e.text for e in rec.of("thinking")) == "let me think"  # type: ignore[union-attr]
    finally:
        await runtime.close()


async def test_exhausted_after_max_rounds(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.handler = lambda request: ToolCalls([("list_dir", {})])
    runtime, rec = await started_runtime(
        make_settings(tmp_path, fake_llm.base_url, llm={"max_tool_rounds": 3})
    )
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "loop forever", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        finished = rec.of("turn_finished")[0]
        assert finished.outcome == "exhausted"  # type: ignore[union-attr]
        assert finished.failure is None  # type: ignore[union-attr]
        turn = await runtime.parts.session_store.latest_turn(session.id or 0)
        assert turn is not None and turn.error == "Exceeded 3 tool-call rounds without a final answer."
        assert fake_llm.calls == 3
    finally:
        await runtime.close()


async def test_bad_tool_arguments_and_unknown_tools_are_failed_results(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([("read_file", {"nope": 1}), ("teleport", {})]), Text("ok"))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "go", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        tool_messages = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
        assert tool_messages[0]["content"].startswith("Error: invalid arguments")
        assert "unknown tool 'teleport'" in tool_messages[1]["content"]
    finally:
        await runtime.close()


async def test_the_model_reads_one_error_prefix_for_an_unknown_tool(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """Regression: the model read "Error: Error: unknown tool 'execute_task'" (a tool that exists
    now: the unknown one here is another)."""
    fake_llm.script(ToolCalls([("summon_genie", {})]), Text("ok"))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "go", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        [tool] = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
        assert tool["content"].startswith("Error: unknown tool 'summon_genie'. Available tools: ")
        assert tool["content"].count("Error") == 1
    finally:
        await runtime.close()


async def test_a_new_chats_first_message_reads_nothing_back(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session created just now has no mail, history or turn: nothing is read to learn that."""
    fake_llm.script(Text("Welcome!"))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(2002, user_id=2002, language="en")  # created now
        reads: list[object] = []
        read_sync = runtime.parts.db.read_sync

        async def counted(fn: Any) -> Any:
            reads.append(fn)
            return await read_sync(fn)

        monkeypatch.setattr(runtime.parts.db, "read_sync", counted)
        await runtime.chat.post_user_message(session, "hello", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        assert reads == []
        assert fake_llm.requests[0]["messages"][1:-1] == [{"role": "user", "content": "hello"}]
        entries = await runtime.parts.history.entries(session.id or 0)
        assert [(e.role, e.content) for e in entries] == [
            ("user", "hello"),
            ("assistant", "Welcome!"),
        ]
    finally:
        await runtime.close()
