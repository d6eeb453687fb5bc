"""Turn loop through the real openai SDK against the fake server."""

from __future__ import annotations

from pathlib import Path

from runtime.events import TurnFinished
from runtime.storage.models import ToolCallStatus
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text, ToolCalls
from tests.runtime.turn.harness import started_runtime


async def test_text_turn_streams_and_finishes(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("Hello there, friend!", chunk_size=5))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat_session(1001, user_id=1001, language="en")
        await runtime.post_user_message(session, "hi", envelope_id="u1")
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
        session = await runtime.chat_session(1001, user_id=1001, language="en")
        await runtime.post_user_message(session, "what's in my notes?", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        second = fake_llm.requests[1]["messages"]
        roles = [m["role"] for m in second]
        assert roles == ["system", "user", "assistant", "tool", "system"]
        assert "buy milk" in second[3]["content"]
        entries = await runtime.history.entries(session.id or 0)
        assert [c.status for e in entries for c in e.calls] == [ToolCallStatus.DONE]
    finally:
        await runtime.close()
