"""How an MCP call's approval prompt reads (issue 16 §3): server, tool, arguments with long values cut.

Rendered with the real Translator and checked with the strict Telegram HTML parser the fake Bot
API uses, so what is asserted is what the chat would show.
"""

from __future__ import annotations

import json
from typing import Any

from agentgram.bot.telegram.views.prompts import (
    MAX_SHOWN,
    VALUE_SHOWN,
    approval_prompt,
    decided_prompt,
    decision_line,
)
from agentgram.runtime.infra.events import ApprovalDetails
from agentgram.runtime.infra.i18n import Translator
from tests.fakes.telegram_html import parse_html, visible_length

T = Translator()
TELEGRAM_LIMIT = 4096


def mcp_details(arguments: dict[str, Any]) -> ApprovalDetails:
    return ApprovalDetails(
        tool_name="mcp__github__create_issue",
        arguments=arguments,
        mcp_server="github",
        mcp_tool="create_issue",
    )


def shown_text(html: str) -> str:
    return parse_html(html)


def test_the_prompt_names_the_server_and_the_tools_own_name() -> None:
    prompt = approval_prompt(T, "en", "r1", mcp_details({"title": "Bug", "labels": ["a", "b"]}))
    assert "Call <code>create_issue</code> on MCP server <code>github</code> with:" in prompt.html
    assert json.dumps({"title": "Bug", "labels": ["a", "b"]}, indent=2) in shown_text(prompt.html)
    assert "mcp__github__create_issue" not in prompt.html
    assert prompt.attachment is None


def test_the_prompt_speaks_russian() -> None:
    prompt = approval_prompt(T, "ru", "r1", mcp_details({"title": "Bug"}))
    assert "Вызвать <code>create_issue</code> на MCP-сервере <code>github</code>" in prompt.html


def test_a_long_value_is_cut_in_the_shown_json_and_attached_whole() -> None:
    body = "word " * 400
    arguments = {"title": "Crash on start", "body": body, "labels": ["bug"]}
    prompt = approval_prompt(T, "en", "r1", mcp_details(arguments))
    shown = shown_text(prompt.html)
    start = shown.index("{")
    end = shown.rindex("}") + 1
    visible = json.loads(shown[start:end])  # still a whole JSON object: the structure stays readable
    assert visible["title"] == "Crash on start" and visible["labels"] == ["bug"]
    assert visible["body"] == body[: VALUE_SHOWN - 1] + "…"
    assert "the full text is attached" in shown
    assert prompt.attachment is not None
    assert prompt.attachment.filename == "arguments.json"
    assert json.loads(prompt.attachment.text) == arguments


def test_long_values_nested_in_lists_and_objects_are_cut_too() -> None:
    arguments = {"items": [{"note": "x" * 500}, "y" * 500], "count": 3}
    prompt = approval_prompt(T, "en", "r1", mcp_details(arguments))
    shown = shown_text(prompt.html)
    visible = json.loads(shown[shown.index("{") : shown.rindex("}") + 1])
    assert visible == {
        "items": [{"note": "x" * (VALUE_SHOWN - 1) + "…"}, "y" * (VALUE_SHOWN - 1) + "…"],
        "count": 3,
    }
    assert prompt.attachment is not None and json.loads(prompt.attachment.text) == arguments


def test_many_values_stay_within_one_telegram_message_and_are_attached() -> None:
    arguments = {f"key{i}": "v" * VALUE_SHOWN for i in range(60)}  # each value fits, all of them do not
    prompt = approval_prompt(T, "en", "r1", mcp_details(arguments))
    assert visible_length(prompt.html) < MAX_SHOWN + 500 < TELEGRAM_LIMIT
    decided = decided_prompt(prompt.body, decision_line(T, "en", "rejected", "r" * 5000))
    assert visible_length(decided) <= TELEGRAM_LIMIT  # edited into its decided form, it still fits
    assert prompt.attachment is not None and json.loads(prompt.attachment.text) == arguments


def test_a_built_in_tools_long_argument_is_cut_the_same_way() -> None:
    details = ApprovalDetails(tool_name="spawn_agent", arguments={"task": "t" * 1000})
    prompt = approval_prompt(T, "en", "r1", details)
    assert "Call <code>spawn_agent</code> with:" in prompt.html
    assert "t" * VALUE_SHOWN not in prompt.html
    assert prompt.attachment is not None and json.loads(prompt.attachment.text) == {"task": "t" * 1000}
