"""Where a session's output goes is one rule, :meth:`Address.of` (issue 24): a stored session and an
adapter's reference to it address alike; a tool's events go where its session's do."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.app import SessionRef, SessionSource
from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.infra.events import Address
from agentgram.runtime.infra.storage.models import ChatSession


def test_a_session_and_its_reference_have_one_address() -> None:
    row = ChatSession(id=5, source=SessionSource.TERMINAL, chat_id=42, language_code="ru")
    expected = Address(session_id=5, source="terminal", chat_id=42, language="ru")
    assert Address.of(row) == Address.of(SessionRef.of(row)) == expected


def test_a_tool_addresses_its_session() -> None:
    ctx = ToolContext(workdir=Path("/w"), session_id=5, source="cron", chat_id=42)
    assert ctx.address == Address(session_id=5, source="cron", chat_id=42)
