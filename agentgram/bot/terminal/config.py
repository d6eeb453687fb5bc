"""``config.yml`` as ``agentgram chat`` reads it: Telegram optional.

``agentgram chat`` runs beside the Telegram bot when a bot token is configured,
and alone without one. The whole config is the one root model,
:class:`~bot.settings.AgentgramSettings` (``ChatSettings`` here, its
``telegram`` ``None`` when no bot token is set), validated by the one
:func:`bot.config_check.inspect` — which also says when a ``telegram`` section
counts as absent; with a token the chat gets a :class:`~bot.settings.BotSettings`
validated exactly as ``agentgram run`` validates it.

The terminal talks as one user, "the user from the config": the first of
``telegram.allowed_user_ids`` when Telegram is configured (the terminal then
shares that user's chat id with Telegram: one history search, one set of cron
jobs, tics' home chat), else ``terminal.user_id``.
"""

from __future__ import annotations

from agentgram.bot.config_check import check_chat_config, check_chat_user
from agentgram.bot.settings import AgentgramSettings

ChatSettings = AgentgramSettings
"""The config of a terminal chat: the root model, ``telegram`` ``None`` when no bot token is set."""

__all__ = ["ChatSettings", "chat_user", "check_chat_config", "check_chat_user"]


def chat_user(settings: AgentgramSettings) -> int:
    """The terminal's user and chat id (module docstring)."""
    if settings.telegram is not None:
        return settings.telegram.owner
    assert settings.terminal.user_id is not None  # check_chat_user refuses a config without one
    return settings.terminal.user_id
