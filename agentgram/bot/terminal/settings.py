"""The ``terminal`` config section (``agentgram chat``); the whole config as the terminal reads
it is :mod:`bot.terminal.config`."""

from __future__ import annotations

from pydantic import Field

from agentgram.runtime.infra.config import Section

HISTORY_SHOWN = 3
"""Exchanges of the active terminal session shown again on start."""


class TerminalSettings(Section):
    user_id: int | None = None
    """The terminal's user (and chat) id when no Telegram bot is configured."""
    history_shown: int = Field(default=HISTORY_SHOWN, ge=0, le=50)
    """How many earlier exchanges ``agentgram chat`` shows when it starts."""
