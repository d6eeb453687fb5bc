"""MCP servers on the official SDK (issue 16 req. 1, 2, 4): config, listing, calls, failures, restarts."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import psutil
import pytest

from agentgram.runtime.capabilities.mcp.servers import McpServer, McpServers, ServerState
from agentgram.runtime.capabilities.mcp.tools import mcp_tools, result_text
from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.infra.config import McpServerSettings, McpSettings
from agentgram.runtime.infra.errors import ConfigError, ToolError
from tests.conftest import make_settings
from tests.runtime.capabilities.mcp.conftest import TIME_SERVER, kill_time_servers, time_servers


def time_server(**overrides: object) -> McpServer:
    return McpServer("time", McpServerSettings.model_validate({**TIME_SERVER, **overrides}))


@pytest.mark.parametrize(
    ("server", "key", "problem"),
    [
        ({}, "mcp.servers.x", "exactly one of 'command'"),
        ({"command": "a", "url": "http://127.0.0.1:1/mcp"}, "mcp.servers.x", "exactly one of 'command'"),
        ({"url": "ftp://host"}, "mcp.servers.x.url", "not an http"),
        ({"command": "a", "approval": "maybe"}, "mcp.servers.x.approval", "'maybe' is not one of"),
        ({"command": "a", "timeout": "soon"}, "mcp.servers.x.timeout", "not a duration"),
    ],
)
def test_an_invalid_server_is_one_config_error_naming_its_key(
    tmp_path: Path, server: dict[str, object], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_settings(tmp_path, "http://127.0.0.1:9/v1", mcp={"servers": {"x": server}})
    assert caught.value.key == key
    assert problem in str(caught.value)


def test_a_server_name_that_cannot_be_part_of_a_tool_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        make_settings(tmp_path, "http://127.0.0.1:9/v1", mcp={"servers": {"My Server": {"command": "a"}}})
    assert caught.value.key == "mcp.servers" and "'My Server'" in str(caught.value)


@pytest.mark.parametrize("name", ["a__b", "_a", "a-", "a--b", "a_-b", "x" * 33])
def test_a_server_name_with_a_double_separator_is_refused(tmp_path: Path, name: str) -> None:
    """``a`` + tool ``b__c`` and ``a__b`` + tool ``c`` would both be ``mcp__a__b__c``, and
    ``mcp__a__*`` would name ``a__b``'s tools too."""
    with pytest.raises(ConfigError) as caught:
        make_settings(tmp_path, "http://127.0.0.1:9/v1", mcp={"servers": {name: {"command": "a"}}})
    assert caught.value.key == "mcp.servers" and repr(name) in str(caught.value)


def test_single_separators_inside_a_server_name_are_fine(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, "http://127.0.0.1:9/v1", mcp={"servers": {"my_fs-2": {"command": "a"}}}
    )
    assert list(settings.mcp.servers) == ["my_fs-2"]


def test_headers_take_env_values_and_stay_masked(tmp_path: Path) -> None:
    from agentgram.bot.settings import bot_settings_from_mapping
    from agentgram.runtime.infra.config import masked
    from tests.conftest import config_mapping

    raw = config_mapping(
        tmp_path,
        "http://127.0.0.1:9/v1",
        mcp={
            "servers": {
                "gh": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOK}"}}
            }
        },
    )
    settings = bot_settings_from_mapping(raw, {"TOK": "s3cret"})
    assert settings.mcp.servers["gh"].headers["Authorization"].get_secret_value() == "Bearer s3cret"
    assert "s3cret" not in json.dumps(masked(settings))


async def test_the_time_servers_tools_are_listed_with_their_schemas() -> None:
    server = time_server()
    try:
        tools = {tool.name: tool for tool in mcp_tools(server, await server.list_tools())}
        assert set(tools) == {"mcp__time__get_current_time", "mcp__time__convert_time"}
        spec = tools["mcp__time__get_current_time"].spec
        assert spec.parameters["required"] == ["timezone"]
        assert spec.parameters["properties"]["timezone"]["type"] == "string"
        assert "time" in spec.description.lower()
        assert server.state is ServerState.RUNNING
        answer = await tools["mcp__time__get_current_time"].execute(
            tools["mcp__time__get_current_time"].parse('{"timezone": "Asia/Tokyo"}'), ToolContext(Path("."))
        )
        assert json.loads(answer)["timezone"] == "Asia/Tokyo"
    finally:
        await server.close()
    assert server.state is ServerState.STOPPED
    assert time_servers() == 0


async def test_arguments_only_have_to_be_a_json_object() -> None:
    server = time_server()
    tool = mcp_tools(server, await server.list_tools())[0]
    try:
        with pytest.raises(ToolError, match="JSON object"):
            tool.parse("[1]")
        with pytest.raises(ToolError, match="not valid JSON"):
            tool.parse("{")
        assert tool.parse({"timezone": "UTC", "extra": 1}).values() == {"timezone": "UTC", "extra": 1}
        with pytest.raises(ToolError, match="Not/AZone"):  # an error result: the model reads why
            result_text(await server.call("get_current_time", {"timezone": "Not/AZone"}))
    finally:
        await server.close()


async def test_a_server_whose_command_does_not_exist_is_a_readable_error_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = McpServer("ghost", McpServerSettings(command="/nonexistent/mcp-ghost"))
    with caplog.at_level(logging.WARNING, logger="agentgram.mcp"):
        with pytest.raises(ToolError) as caught:
            await server.list_tools()
    assert "ghost" in str(caught.value) and "could not start" in str(caught.value)
    assert "No such file" in str(caught.value)
    assert any("ghost" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert server.state is ServerState.FAILED and server.reason is not None
    await server.close()


async def test_repeated_failures_back_off() -> None:
    now = [100.0]
    server = McpServer("ghost", McpServerSettings(command="/nonexistent/mcp-ghost"), clock=lambda: now[0])
    with pytest.raises(ToolError, match="tried again on the next call"):
        await server.list_tools()
    with pytest.raises(ToolError, match="could not start"):  # the first retry is immediate
        await server.list_tools()
    with pytest.raises(ToolError, match="tried again in 1s"):
        await server.list_tools()
    now[0] += 1.5
    with pytest.raises(ToolError, match="could not start"):
        await server.list_tools()


async def test_a_killed_server_is_started_again_on_the_next_call() -> None:
    server = time_server()
    try:
        assert (await server.call("get_current_time", {"timezone": "UTC"})).is_error is False
        assert kill_time_servers() == 1
        try:
            first = result_text(await server.call("get_current_time", {"timezone": "UTC"}))
        except ToolError as exc:  # the dead session is noticed by this call
            assert "stopped" in str(exc) and "started again" in str(exc)
        else:
            assert json.loads(first)["timezone"] == "UTC"
        answer = result_text(await server.call("get_current_time", {"timezone": "Europe/Berlin"}))
        assert json.loads(answer)["timezone"] == "Europe/Berlin"
        assert server.state is ServerState.RUNNING
    finally:
        await server.close()
    assert time_servers() == 0


async def test_disabled_servers_are_not_managed_and_close_ends_every_session() -> None:
    servers = McpServers(
        McpSettings.model_validate(
            {"servers": {"time": {**TIME_SERVER, "lazy": False}, "off": {"command": "x", "enabled": False}}}
        )
    )
    assert [s.name for s in servers.all()] == ["time"] and servers.get("off") is None
    assert [s.name for s in servers.eager()] == ["time"]
    await servers.eager()[0].list_tools()
    assert time_servers() == 1
    await servers.close()
    assert time_servers() == 0


async def test_a_restart_racing_the_dead_servers_teardown_keeps_the_new_server_alive() -> None:
    """Calls that all find the killed server's session dead: one ends it, one starts the next, and
    the old start's teardown (its own pid, not the field) leaves the new server running."""
    server = time_server()
    try:
        for _ in range(3):
            await server.call("get_current_time", {"timezone": "UTC"})
            assert kill_time_servers() == 1
            calls = (server.call("get_current_time", {"timezone": "UTC"}) for _ in range(4))
            await asyncio.gather(*calls, return_exceptions=True)
            answer = result_text(await server.call("get_current_time", {"timezone": "Asia/Tokyo"}))
            assert json.loads(answer)["timezone"] == "Asia/Tokyo"
            assert server.pid is not None and psutil.pid_exists(server.pid) and time_servers() == 1
    finally:
        await server.close()
    assert time_servers() == 0
