"""MCP tools in real turns (issue 16 req. 2, 3): listed at start, gated like built-ins, results to the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgram.runtime.capabilities.mcp.servers import ServerState
from agentgram.runtime.infra.events import ApprovalRequested
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.capabilities.mcp.conftest import TIME_SERVER, time_servers
from tests.runtime.core.turn.harness import started_runtime

TOOL = "mcp__time__get_current_time"


def settings(tmp_path: Path, llm: FakeOpenAI, **sections: Any) -> Any:
    server = {**TIME_SERVER, "lazy": False, **sections.pop("server", {})}
    return make_settings(tmp_path, llm.base_url, mcp={"servers": {"time": server}}, **sections)


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_an_allowed_call_runs_and_its_real_result_reaches_the_model(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call(TOOL, {"timezone": "Asia/Tokyo"}, id="c_t")]), Text("it is late in Tokyo")
    )
    rules = {"rules": [{"tool": "mcp__time__*", "action": "allow"}]}
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, approval=rules))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "time in Tokyo?", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        offered = {tool["function"]["name"]: tool["function"] for tool in fake_llm.requests[0]["tools"]}
        assert offered[TOOL]["parameters"]["required"] == ["timezone"]
        (result,) = tool_results(fake_llm.requests[1])
        assert json.loads(result)["timezone"] == "Asia/Tokyo"
    finally:
        await runtime.close()
    assert time_servers() == 0


async def test_a_servers_approval_setting_is_a_rule_for_its_tools(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call(TOOL, {"timezone": "UTC"}, id="c_t")]), Text("done"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, server={"approval": "allow"}))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "time?", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        assert rec.of("approval_requested") == []
        assert json.loads(tool_results(fake_llm.requests[1])[0])["timezone"] == "UTC"
    finally:
        await runtime.close()


async def test_a_call_no_rule_matches_asks_for_approval(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call(TOOL, {"timezone": "UTC"}, id="c_t")]), Text("done"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "time?", envelope_id="u1")
        await rec.wait_kind("approval_requested", timeout=30)
        (asked,) = rec.of("approval_requested")
        assert isinstance(asked, ApprovalRequested)
        assert asked.details.tool_name == TOOL and asked.details.arguments == {"timezone": "UTC"}
    finally:
        await runtime.close()


async def test_a_server_that_cannot_start_leaves_the_runtime_running(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(Text("hello"))
    config = settings(tmp_path, fake_llm, server={"command": str(tmp_path / "no-such-server"), "args": []})
    runtime, rec = await started_runtime(config)
    try:
        server = runtime.parts.mcp.get("time")
        assert server is not None and server.state is ServerState.FAILED
        assert runtime.parts.tools.get(TOOL) is None
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "hi", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
    finally:
        await runtime.close()
