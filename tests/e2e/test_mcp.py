"""MCP in the chat (issue 16 §3, §5): the approval prompt of an MCP call, and ``/mcp``.

The real bot between the fake Bot API and the fake OpenAI server, with the real published
``mcp-server-time`` over stdio as config gives it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgram.runtime.scheduler.models import TicRunStatus
from tests.conftest import ALLOWED_USER, STRANGER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import tap, tool_results, wait_decided, wait_prompt
from tests.e2e.test_schedule import TIC, tics, until, write_tic_md
from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.runtime.capabilities.mcp.conftest import TIME_SERVER, time_servers

TOOL = "mcp__time__get_current_time"
TIME = {**TIME_SERVER, "description": "Time & timezones"}
SLOW = 30.0
"""Seconds a turn that starts or calls the MCP server may take (a subprocess start on a busy box)."""


def servers(**each: dict[str, Any]) -> dict[str, Any]:
    return {"servers": each}


def eager_time() -> dict[str, Any]:
    return servers(time={**TIME, "lazy": False})


def time_in_tokyo() -> ToolCalls:
    return ToolCalls([Call(TOOL, {"timezone": "Asia/Tokyo"}, id="c_t")])


async def mcp_status(rig: Rig, count: int) -> str:
    """The text of the ``count``-th ``/mcp`` answer, asking for it now."""
    rig.say("/mcp")
    await rig.tg.wait_for(lambda: len(_answers(rig)) >= count)
    return _answers(rig)[count - 1]


def _answers(rig: Rig) -> list[str]:
    return [m.visible_text for m in rig.chat() if "MCP servers" in m.visible_text]


# --- the approval prompt ------------------------------------------------------------------------


async def test_the_prompt_names_server_and_tool_and_approving_sends_the_real_result(tmp_path: Path) -> None:
    async with running_bot(tmp_path, mcp=eager_time()) as rig:
        rig.llm.script(time_in_tokyo(), Text("It is late in Tokyo."))
        rig.say("what time is it in Tokyo?")
        prompt = await wait_prompt(rig)
        assert "Call <code>get_current_time</code> on MCP server <code>time</code> with:" in (
            prompt.text or ""
        )
        assert json.dumps({"timezone": "Asia/Tokyo"}, indent=2) in prompt.visible_text
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns(timeout=SLOW)
        await wait_decided(rig, prompt, "✅ Approved")
        (result,) = tool_results(rig.llm.requests[1])
        assert json.loads(result)["timezone"] == "Asia/Tokyo"  # the server's own answer
        assert "datetime" in json.loads(result)
    assert time_servers() == 0


async def test_rejecting_with_a_reason_tells_the_model_and_calls_nothing(tmp_path: Path) -> None:
    async with running_bot(tmp_path, mcp=eager_time()) as rig:
        rig.llm.script(time_in_tokyo(), Text("Then UTC it is."))
        rig.say("what time is it in Tokyo?")
        prompt = await wait_prompt(rig)
        rig.say("I meant UTC", reply_to_message_id=prompt.message_id)
        await rig.wait_turns(timeout=SLOW)
        await wait_decided(rig, prompt, "❌ Rejected: I meant UTC")
        assert tool_results(rig.llm.requests[1]) == ["User rejected this tool call. Reason: I meant UTC"]


# --- /mcp ---------------------------------------------------------------------------------------


async def test_mcp_shows_a_lazy_server_stopped_then_running_and_activated(tmp_path: Path) -> None:
    allow = {"rules": [{"tool": "mcp__time__*", "action": "allow"}]}
    async with running_bot(tmp_path, mcp=servers(time=TIME), approval=allow) as rig:
        before = await mcp_status(rig, 1)
        assert before == (
            "🔌 MCP servers\n"
            "• time — Time & timezones: ⚪ stopped · not started yet · not activated in this chat (I activate it when I need it)"
        )
        rig.llm.script(
            ToolCalls([Call("activate_tools", {"servers": ["time"]}, id="c_a")]),
            time_in_tokyo(),
            Text("It is late in Tokyo."),
        )
        rig.say("what time is it in Tokyo?")
        await rig.wait_turns(timeout=SLOW)
        assert json.loads(tool_results(rig.llm.requests[2])[1])["timezone"] == "Asia/Tokyo"
        after = await mcp_status(rig, 2)
        assert (
            after
            == "🔌 MCP servers\n• time — Time & timezones: 🟢 running · 2 tools · activated in this chat"
        )
        assert rig.llm.calls == 3  # /mcp never reaches the model


async def test_mcp_shows_why_a_server_failed_and_the_eager_one_running(tmp_path: Path) -> None:
    broken = {"command": "/nonexistent", "lazy": False, "description": "Calendar <work>"}
    async with running_bot(tmp_path, mcp=servers(calendar=broken, time={**TIME, "lazy": False})) as rig:
        lines = (await mcp_status(rig, 1)).splitlines()
        assert lines[0] == "🔌 MCP servers"
        assert lines[1].startswith("• calendar — Calendar <work>: 🔴 failed: ")
        assert "nonexistent" in lines[1] and "tools" not in lines[1] and "not started" not in lines[1]
        assert (
            lines[2] == "• time — Time & timezones: 🟢 running · 2 tools"
        )  # lazy: false — always offered, nothing to activate


async def test_mcp_speaks_russian(tmp_path: Path) -> None:
    async with running_bot(tmp_path, mcp=eager_time()) as rig:
        rig.say("/mcp", language_code="ru")
        shown = await rig.wait_text("MCP-серверы")
        assert shown.visible_text == "🔌 MCP-серверы\n• time — Time & timezones: 🟢 работает · 2 инструмента"


async def test_mcp_without_servers_says_how_to_add_one(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/mcp")
        shown = await rig.wait_text("No MCP servers yet")
        assert (
            "<code>mcp.servers</code>" in (shown.text or "")
            and '"MCP servers" in the README' in shown.visible_text
        )


async def test_mcp_answers_a_stranger_only_with_the_refusal(tmp_path: Path) -> None:
    async with running_bot(tmp_path, mcp=eager_time()) as rig:
        rig.tg.add_chat(STRANGER)
        rig.tg.send_text(STRANGER, "/mcp")
        await rig.tg.wait_for(lambda: rig.tg.messages(STRANGER) != [])
        assert [m.visible_text for m in rig.tg.messages(STRANGER)] == [
            f"This is a private bot. Your Telegram user id is {STRANGER}."
        ]


# --- headless runs --------------------------------------------------------------------------------


async def test_an_mcp_call_in_a_tic_is_auto_denied_without_a_prompt(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "- tell me the time in Tokyo\n")
    async with running_bot(tmp_path, tic=TIC, mcp=eager_time()) as rig:
        rig.tg.add_chat(ALLOWED_USER)  # the user has talked to the bot before
        done = tics(rig)
        rig.llm.script(time_in_tokyo(), Text("TIC_OK"))
        rig.llm.handler = lambda body: Text("TIC_OK")
        await until(rig, lambda: any(t.status == TicRunStatus.RAN for t in done), timeout=SLOW)
        assert tool_results(rig.llm.requests[1]) == [
            "Tool call auto-denied: this session does not support approval requests."
        ]
        await rig.bot.delivery.idle()
        assert rig.chat() == [], "no approval prompt, no tool status line, no report"
