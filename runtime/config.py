"""The one typed configuration model, validated where it enters.

``load_config`` reads YAML, expands ``${ENV_VAR}`` inside values, applies
``AGENTGRAM_SECTION__KEY`` environment overrides and validates the result
with pydantic. Any problem becomes one :class:`~runtime.errors.ConfigError`
naming the key, so the CLI can print a single line and exit 2. The rest of
the code only ever sees :class:`Settings`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import time
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from runtime.errors import ConfigError

ENV_PREFIX = "AGENTGRAM_"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: object) -> float:
    """Seconds from a number or a string such as ``90``, ``30m``, ``1.5h``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 30m or 1h")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a duration (use e.g. 45s, 30m, 2h)")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TelegramSettings(_Section):
    token: SecretStr
    api_base_url: str = "https://api.telegram.org"
    allowed_user_ids: list[int] = Field(min_length=1)
    stream_edit_interval: float = Field(default=1.0, ge=0.05)
    stream_first_delay: float = Field(default=0.5, ge=0, le=10)
    poll_timeout: int = Field(default=30, ge=0, le=50)
    max_retries: int = Field(default=3, ge=0, le=10)
    messages_per_second: float = Field(default=30.0, gt=0)

    @field_validator("api_base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @property
    def bot_base_url(self) -> str:
        return f"{self.api_base_url}/bot"

    @property
    def file_base_url(self) -> str:
        return f"{self.api_base_url}/file/bot"


class LLMSettings(_Section):
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr = SecretStr("")
    model: str
    fallback_models: list[str] = Field(default_factory=list)
    max_tool_rounds: int = Field(default=20, ge=1, le=500)
    max_history_messages: int = Field(default=200, ge=2)
    max_tool_result_chars: int | None = Field(default=4000, ge=100)
    request_timeout: Duration = 120.0
    max_retries: int = Field(default=1, ge=0, le=10)


class StorageSettings(_Section):
    url: str = "sqlite+aiosqlite:///./data/agentgram.db"


class AgentSettings(_Section):
    workdir: Path = Path("./workspace")
    system_prompt_file: Path | None = None
    timezone: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r}") from exc
        return value


class LocaleSettings(_Section):
    default: str = "en"


ApprovalAction = Literal["allow", "require", "deny"]


class ApprovalRuleSettings(_Section):
    tool: str
    path: str | None = None
    action: ApprovalAction
    priority: int = 100
    source: str | None = None
    note: str | None = None


class ApprovalSettings(_Section):
    rules: list[ApprovalRuleSettings] = Field(default_factory=list)
    timeout: Duration | None = None
    bypass_duration: Duration = 900.0


class MailboxSettings(_Section):
    max_unread: int = Field(default=256, ge=1)
    resume_on_message: bool = False


class QuietHours(_Section):
    start: time
    end: time

    @classmethod
    def parse(cls, value: object) -> QuietHours | None:
        if value is None or isinstance(value, QuietHours):
            return value
        match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", str(value))
        if not match:
            raise ValueError(f"{value!r} is not a range like 23:00-07:00")
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        try:
            return cls(start=time(h1, m1), end=time(h2, m2))
        except ValueError as exc:
            raise ValueError(f"{value!r} holds an impossible time") from exc


class QuietHoursSettings(_Section):
    range: Annotated[QuietHours | None, BeforeValidator(QuietHours.parse)] = None
    hold: bool = False


class TicSettings(_Section):
    enabled: bool = True
    interval: Duration = 1800.0
    cron: str | None = None
    prompt: str | None = None
    chat_id: int | None = None


class SchedulerSettings(_Section):
    misfire_grace: Duration = 3600.0


class LoggingSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    redact_payloads: bool = True


class Settings(_Section):
    telegram: TelegramSettings
    llm: LLMSettings
    storage: StorageSettings = StorageSettings()
    agent: AgentSettings = AgentSettings()
    locale: LocaleSettings = LocaleSettings()
    approval: ApprovalSettings = ApprovalSettings()
    mailbox: MailboxSettings = MailboxSettings()
    quiet_hours: QuietHoursSettings = QuietHoursSettings()
    tic: TicSettings = TicSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    logging: LoggingSettings = LoggingSettings()


# --- loading ----------------------------------------------------------------


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read, expand, override and validate; raise one :class:`ConfigError`."""
    env = os.environ if environ is None else environ
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError("", f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError("", f"{path} must hold a mapping of sections")
    return settings_from_mapping(raw, env)


def settings_from_mapping(raw: dict[str, Any], env: Mapping[str, str]) -> Settings:
    data = _expand(raw, env, ())
    _apply_overrides(data, env)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(key, _problem(first)) from None


def _problem(error: Mapping[str, Any]) -> str:
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return "is not a known key"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _expand(value: Any, env: Mapping[str, str], loc: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, env, (*loc, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, (*loc, str(i))) for i, v in enumerate(value)]
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigError(".".join(loc), f"environment variable {name} is not set")
            return env[name]

        return _ENV_REF.sub(substitute, value)
    return value


def _apply_overrides(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """``AGENTGRAM_LLM__MODEL=x`` sets ``llm.model``; values are parsed as YAML."""
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        try:
            node[path[-1]] = yaml.safe_load(value)
        except yaml.YAMLError:
            node[path[-1]] = value


def masked(settings: Settings) -> dict[str, Any]:
    """The effective config as plain data with every secret replaced by ``***``."""
    return settings.model_dump(mode="json")  # SecretStr dumps as '**********'
