"""The prefetched request is adopted only if it offered the tools the first round offers (review
finding: the adoption compared the messages alone, and the two computed the MCP tools apart)."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.core.turn.loop import TurnRunner
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.infra.events import Address
from agentgram.runtime.infra.llm.types import ChatMessage, SystemMessage, UserMessage
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Hang, Text
from tests.runtime.core.turn.harness import started_runtime


async def test_a_request_with_the_same_messages_but_other_tools_is_asked_again(
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
        messages: list[ChatMessage] = [SystemMessage("s"), UserMessage("now")]
        fewer = runner.tools.specs()[1:]
        prefetch = Prefetch(runtime.parts.llm, messages, fewer, services.clock())
        assert not prefetch.asked(messages, runner.tools.specs())
        await fake_llm.wait_for_requests(1)
        result = await runner.call_model(list(messages), prefetch)
        assert result.text == "fresh"
        await fake_llm.wait_stream_closed()
        assert fake_llm.calls == 2
        assert len(fake_llm.requests[1]["tools"]) == len(runner.tools.specs())
    finally:
        await runtime.close()
