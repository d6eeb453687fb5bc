"""Lazy MCP servers (issue 16 req. 2): named in ``activate_tools``, their tools offered from the
round after the agent activated them; grants per session, kept over a restart, gone after /new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgram.runtime.capabilities.mcp.servers import ServerState
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.capabilities.mcp.conftest import TIME_SERVER
from tests.runtime.core.turn.harness import started_runtime

TOOL = "mcp__time__get_current_time"
ALLOW_TIME = {"rules": [{"tool": "mcp__time__*", "action": "allow"}]}


def settings(tmp_path: Path, llm: FakeOpenAI, **server: Any) -> Any:
    time_server = {**TIME_SERVER, "description": "Current time and time zone conversions", **server}
    return make_settings(tmp_path, llm.base_url, mcp={"servers": {"time": time_server}}, approval=ALLOW_TIME)


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools", [])}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_activation_offers_the_servers_tools_from_the_next_round_of_the_same_turn(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_a")]),
        ToolCalls([Call(TOOL, {"timezone": "Asia/Tokyo"}, id="c_t")]),
        Text("it is late in Tokyo"),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        (before,) = await runtime.sessions.mcp_overview(session)
        assert (before.state, before.tools, before.activated) == (ServerState.STOPPED, None, False)
        await runtime.chat.post_user_message(session, "time in Tokyo?", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)

        first, second, third = fake_llm.requests
        assert TOOL not in offered(first)
        activate = offered(first)["activate_tools"]
        assert "- time: Current time and time zone conversions" in activate["description"]
        assert rec.of("approval_requested") == []  # activating asks nothing
        assert "get_current_time" in tool_results(second)[0]
        assert offered(second)[TOOL]["parameters"]["required"] == ["timezone"]
        assert json.loads(tool_results(third)[1])["timezone"] == "Asia/Tokyo"

        (after,) = await runtime.sessions.mcp_overview(session)
        assert after.state is ServerState.RUNNING and after.activated
        assert after.tools is not None and after.tools >= 2
    finally:
        await runtime.close()


async def test_the_grant_survives_a_restart_and_new_clears_it(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_a")]), Text("ready"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "get the clock ready", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
    finally:
        await runtime.close()

    fake_llm.script(
        ToolCalls([Call(TOOL, {"timezone": "UTC"}, id="c_t")]), Text("noon"), Text("a fresh start")
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        (status,) = await runtime.sessions.mcp_overview(session)
        assert status.activated and status.state is ServerState.STOPPED  # granted, not started yet
        await runtime.chat.post_user_message(session, "what time is it?", envelope_id="u2")
        await rec.wait_kind("turn_finished", timeout=30)
        restarted = fake_llm.requests[2]
        assert TOOL in offered(restarted)  # from the first round after the restart
        assert json.loads(tool_results(fake_llm.requests[3])[-1])["timezone"] == "UTC"

        fresh = await runtime.chat.new_session(1001, user_id=1001, language="en", envelope_id="n1")
        (status,) = await runtime.sessions.mcp_overview(fresh)
        assert not status.activated
        await runtime.chat.post_user_message(fresh, "hello", envelope_id="u3")
        await rec.wait_kind("turn_finished", count=2, timeout=30)
        assert TOOL not in offered(fake_llm.requests[4]) and "activate_tools" in offered(fake_llm.requests[4])
    finally:
        await runtime.close()


async def test_an_unknown_server_is_a_readable_error_and_nothing_is_granted(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("activate_tools", {"servers": ["github"]}, id="c_a")]), Text("oh"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "open an issue", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        (error,) = tool_results(fake_llm.requests[1])
        assert "no MCP server named 'github'" in error and "time" in error
        assert TOOL not in offered(fake_llm.requests[1])
    finally:
        await runtime.close()


async def test_a_server_that_cannot_start_is_not_granted(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_a")]), Text("oh"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, command="/nonexistent/mcp-server"))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "time?", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        (error,) = tool_results(fake_llm.requests[1])
        assert "could not start" in error
        (status,) = await runtime.sessions.mcp_overview(session)
        assert status.state is ServerState.FAILED and not status.activated
    finally:
        await runtime.close()


async def test_without_lazy_servers_there_is_no_activate_tools(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("hi"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, lazy=False))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "hello", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        tools = offered(fake_llm.requests[0])
        assert "activate_tools" not in tools and TOOL in tools
    finally:
        await runtime.close()


HELPER = """\
---
description: does small jobs
---
You help.
"""


async def test_a_sub_agent_starts_without_its_parents_grants_and_activates_its_own(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    folder = tmp_path / "workspace" / "agents" / "helper"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(HELPER)
    fake_llm.script(
        ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_a")]),
        ToolCalls([Call("execute_task", {"agent": "helper", "task": "the time in UTC"}, id="c_x")]),
        ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_b")]),  # the helper
        Text("noon"),  # the helper, with the tools it activated
        Text("it is noon"),  # main
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "ask the helper", envelope_id="u1")
        await rec.wait_kind("turn_finished", 2, timeout=30)  # the helper's session's, then main's
        _, main_granted, child_first, child_granted, main_after = fake_llm.requests
        assert TOOL in offered(main_granted)
        assert TOOL not in offered(child_first) and "activate_tools" in offered(child_first)
        assert TOOL in offered(child_granted)
        assert TOOL in offered(main_after)
    finally:
        await runtime.close()
