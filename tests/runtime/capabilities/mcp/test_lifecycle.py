"""MCP servers' lifecycle in a runtime (issue 16 req. 4): a killed server mid-conversation, and the
process ledger that lets the next start reap a server a killed agentgram left behind."""

from __future__ import annotations

import json
from pathlib import Path

from agentgram.runtime.capabilities.mcp.servers import ServerState
from agentgram.runtime.capabilities.tools.processes import PREFIX, ledger_key, start_time
from agentgram.runtime.infra.events import OutcomeKind, TurnFinished
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.capabilities.mcp.conftest import kill_time_servers, time_servers
from tests.runtime.capabilities.mcp.test_in_turns import TOOL, settings, tool_results
from tests.runtime.core.turn.harness import started_runtime

ALLOW = {"rules": [{"tool": "mcp__time__*", "action": "allow"}]}


async def test_a_call_after_the_server_was_killed_gets_an_answer_or_a_readable_error(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call(TOOL, {"timezone": "UTC"}, id="c_1")]),
        Text("first"),
        ToolCalls([Call(TOOL, {"timezone": "Asia/Tokyo"}, id="c_2")]),
        ToolCalls([Call(TOOL, {"timezone": "Europe/Berlin"}, id="c_3")]),
        Text("second"),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, approval=ALLOW))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "time?", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        assert kill_time_servers() == 1

        await runtime.chat.post_user_message(session, "time again?", envelope_id="u2")
        await rec.wait_kind("turn_finished", 2, timeout=30)
        finished = rec.of("turn_finished")[-1]
        assert isinstance(finished, TurnFinished) and finished.outcome is OutcomeKind.FINAL
        after_kill = tool_results(fake_llm.requests[3])[-1]
        if after_kill.startswith("{"):  # the dead session was noticed before the call went out
            assert json.loads(after_kill)["timezone"] == "Asia/Tokyo"
        else:
            assert "'time' stopped" in after_kill and "started again" in after_kill
        assert json.loads(tool_results(fake_llm.requests[4])[-1])["timezone"] == "Europe/Berlin"
        server = runtime.parts.mcp.get("time")
        assert server is not None and server.state is ServerState.RUNNING
    finally:
        await runtime.close()
    assert time_servers() == 0


async def test_a_running_server_is_in_the_process_ledger_until_it_closes(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    runtime, _ = await started_runtime(settings(tmp_path, fake_llm))
    try:
        server = runtime.parts.mcp.get("time")
        assert server is not None and server.pid is not None
        recorded = await runtime.parts.session_store.values_with_prefix(PREFIX)
        assert recorded == {ledger_key(server.pid): start_time(server.pid)}
        await server.close()
        assert server.pid is None and time_servers() == 0
        assert await runtime.parts.session_store.values_with_prefix(PREFIX) == {}
    finally:
        await runtime.close()
