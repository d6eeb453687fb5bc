"""``config.yml`` as ``agentgram chat`` reads it: Telegram optional.

``agentgram chat`` runs beside the Telegram bot when a bot token is configured,
and alone without one. :class:`ChatSettings` is the whole config with the
``telegram`` section optional; a section without a token counts as absent
(a config may keep its ``allowed_user_ids`` and leave the token out), and so
does a token that only names environment variables none of which is set
(``config.example.yml``'s ``${TELEGRAM_BOT_TOKEN}`` with the variable unset:
they are read as empty, :func:`_unset_token_as_empty`), and
:func:`check_chat_config` validates a config with a token exactly as
``agentgram run`` does, so a chat beside the bot gets a
:class:`~bot.settings.BotSettings`.

The terminal talks as one user, "the user from the config": the first of
``telegram.allowed_user_ids`` when Telegram is configured (the terminal then
shares that user's chat id with Telegram: one history search, one set of cron
jobs, tics' home chat), else ``terminal.user_id``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import model_validator

from agentgram.bot.config_check import check_config, check_tool_hooks
from agentgram.bot.settings import BotSettings, TelegramSettings
from agentgram.bot.terminal.settings import TerminalSettings
from agentgram.bot.web.settings import WebSettings
from agentgram.runtime.config_check import RUNTIME_CHECKS, CheckProblem, validate_config
from agentgram.runtime.infra.config import Settings


class ChatSettings(Settings):
    """The config of a terminal chat; ``telegram`` is ``None`` when no bot token is set."""

    telegram: TelegramSettings | None = None
    web: WebSettings = WebSettings()
    terminal: TerminalSettings = TerminalSettings()

    @model_validator(mode="before")
    @classmethod
    def _telegram_without_token_is_absent(cls, data: Any) -> Any:
        """A token-less ``telegram`` section is dropped; its first allowed user becomes the
        terminal's unless ``terminal.user_id`` names one."""
        telegram = data.get("telegram") if isinstance(data, Mapping) else None
        if not isinstance(telegram, Mapping) or str(telegram.get("token") or "").strip():
            return data
        terminal = dict(data.get("terminal") or {})
        ids = telegram.get("allowed_user_ids")
        if terminal.get("user_id") is None and isinstance(ids, list) and ids:
            terminal["user_id"] = ids[0]
        return {**data, "telegram": None, "terminal": terminal}


def chat_user(settings: BotSettings | ChatSettings) -> int:
    """The terminal's user and chat id (module docstring)."""
    if settings.telegram is not None:
        return settings.telegram.owner
    assert settings.terminal.user_id is not None  # check_chat_user refuses a config without one
    return settings.terminal.user_id


def check_chat_user(settings: ChatSettings) -> Iterator[CheckProblem]:
    if settings.telegram is None and settings.terminal.user_id is None:
        yield CheckProblem(
            "terminal.user_id",
            "is required without a telegram.token (any number; your Telegram user id shares its history)",
        )


def check_chat_config(path: Path, environ: Mapping[str, str] | None = None) -> BotSettings | ChatSettings:
    """With a bot token, ``agentgram run``'s validation (:func:`bot.config_check.check_config`);
    without one, the runtime's checks and a user id. Raises :class:`~runtime.config.ConfigInvalid`."""
    checks = (*RUNTIME_CHECKS, check_tool_hooks, check_chat_user)
    env = _unset_token_as_empty(path, os.environ if environ is None else environ)
    alone = validate_config(path, checks, env, model=ChatSettings)
    return alone if alone.telegram is None else check_config(path, environ)


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _unset_token_as_empty(path: Path, environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` with the variables ``telegram.token`` names set empty when it is only such
    references and none of them is set; else ``environ`` (what fails to read, the validation reports)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return environ
    telegram = raw.get("telegram") if isinstance(raw, Mapping) else None
    token = telegram.get("token") if isinstance(telegram, Mapping) else None
    if not isinstance(token, str):
        return environ
    names = _ENV_REF.findall(token)
    if not names or _ENV_REF.sub("", token).strip() or any(name in environ for name in names):
        return environ
    return {**environ, **dict.fromkeys(names, "")}
