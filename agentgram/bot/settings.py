"""The Telegram adapter's settings: the core's sections plus ``telegram``.

The core (:mod:`runtime.config`) knows no chat platform; this model extends it
with the one section only the adapter reads, so ``config.yml`` keeps one
format and is validated once, here, with every error naming its key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from agentgram.bot.terminal.settings import TerminalSettings
from agentgram.bot.web.settings import WebSettings
from agentgram.runtime.infra.config import HttpUrl, Section, Settings, load_config, settings_from_mapping

PUBLIC_API_HOST = "api.telegram.org"
PUBLIC_DOWNLOAD_MB = 20
"""The most a bot may download through the public Bot API; a local Bot API server allows more."""
TOKEN_SHAPE = re.compile(r"\d+:[A-Za-z0-9_-]+")
"""What @BotFather's tokens look like: the bot's id, a colon, the secret (``config_check`` holds a
token to it: aiogram refuses another shape with a traceback when its ``Bot`` is made)."""
PUBLIC_UPLOAD_MB = 50
LOCAL_UPLOAD_MB = 2000
"""The most a bot may send through the public Bot API, and through a local Bot API server."""


class TelegramSettings(Section):
    token: SecretStr
    library: Literal["ptb", "aiogram"] = "ptb"
    """The driver that speaks the Bot API (``bot/telegram/drivers``): python-telegram-bot or aiogram 3."""
    api_base_url: HttpUrl = f"https://{PUBLIC_API_HOST}"
    allowed_user_ids: list[int] = Field(min_length=1)
    stream_edit_interval: float = Field(default=1.0, ge=0.05)
    stream_first_delay: float = Field(default=0.5, ge=0, le=10)
    drafts: bool = True
    draft_interval: float = Field(default=0.3, ge=0.05, le=10)
    poll_timeout: int = Field(default=30, ge=0, le=50)
    max_retries: int = Field(default=3, ge=0, le=10)
    messages_per_second: float = Field(default=30.0, gt=0)
    pairing: bool = False
    job_status_interval: float = Field(default=5.0, ge=2)
    """Seconds between edits of a detached command's live status line (its elapsed time)."""
    max_download_mb: int = Field(default=PUBLIC_DOWNLOAD_MB, ge=1, le=2000)
    """Attachments bigger than this are not fetched (the user is told); over 20 only with a local
    Bot API server at ``api_base_url``."""

    @field_validator("max_download_mb")
    @classmethod
    def _download_limit_fits_the_server(cls, value: int, info: ValidationInfo) -> int:
        """``api_base_url`` is declared first, so it is validated (and in ``info.data``) by now."""
        if value > PUBLIC_DOWNLOAD_MB and _is_public(str(info.data.get("api_base_url", ""))):
            raise ValueError(
                f"over {PUBLIC_DOWNLOAD_MB} needs a local Bot API server at telegram.api_base_url: "
                f"{PUBLIC_API_HOST} refuses bigger downloads"
            )
        return value

    @property
    def max_upload_mb(self) -> int:
        """The largest file ``send_file`` may send through this Bot API server."""
        return PUBLIC_UPLOAD_MB if _is_public(self.api_base_url) else LOCAL_UPLOAD_MB

    @property
    def bot_base_url(self) -> str:
        return f"{self.api_base_url}/bot"

    @property
    def file_base_url(self) -> str:
        return f"{self.api_base_url}/file/bot"

    @property
    def owner(self) -> int:
        """The first allowed user: the one who decides pairing requests, and tics' home chat."""
        return self.allowed_user_ids[0]


def _is_public(api_base_url: str) -> bool:
    """The public Bot API (its limits apply), not a local Bot API server."""
    return urlsplit(api_base_url).hostname == PUBLIC_API_HOST


class _TelegramSection(Section):
    telegram: TelegramSettings


class BotSettings(Settings, _TelegramSection):
    """The whole ``config.yml``. ``telegram`` comes in through a base listed after
    :class:`Settings`, so pydantic sees it first: it keeps its place at the top of
    ``check-config``'s output and of the error list, as in the file."""

    web: WebSettings = WebSettings()
    """The web view (:mod:`bot.web`); its token rules are checked with the section."""
    terminal: TerminalSettings = TerminalSettings()
    """The terminal chat (``agentgram chat``, :mod:`bot.terminal`)."""


def load_bot_config(path: Path, environ: Mapping[str, str] | None = None) -> BotSettings:
    """``config.yml`` as the Telegram adapter reads it (see :func:`runtime.config.load_config`)."""
    return load_config(path, environ, model=BotSettings)


def bot_settings_from_mapping(raw: dict[str, Any], env: Mapping[str, str]) -> BotSettings:
    return settings_from_mapping(raw, env, model=BotSettings)
