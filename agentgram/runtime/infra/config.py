"""The one typed configuration model, validated where it enters.

``load_config`` reads YAML, expands ``${ENV_VAR}`` inside values, applies
``AGENTGRAM_SECTION__KEY`` environment overrides and validates the result
with pydantic against :class:`Settings`, the core's sections — or against the
model an adapter extends it to (``bot.settings.BotSettings`` adds
``telegram``): the core knows no chat platform, and the file keeps one format.
Every problem becomes one :class:`~runtime.errors.ConfigError` line naming the
key (and the environment variable when one supplied the value); all of them
travel together in :class:`ConfigInvalid`, so the CLI prints them and exits 2.
The rest of the code only ever sees typed settings.

Checks that need more than the values themselves (files, drivers, locales,
crontabs) live in :mod:`runtime.config_check`; :func:`parse_config` hands them
the :class:`Origins` that let their errors name an environment variable too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import time
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, overload

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentgram.runtime.infra.errors import ConfigError

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


def http_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL with a host, without a trailing slash."""
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value.rstrip("/")


HttpUrl = Annotated[str, AfterValidator(http_url)]
UserPath = Annotated[Path, AfterValidator(Path.expanduser)]
"""A path where ``~`` means the home directory; relative paths are relative to the working directory."""


class Section(BaseModel):
    """A config section: unknown keys are errors, values never change once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceSettings(Section):
    """What a model costs per million tokens, in whatever currency the provider bills (``/cost``)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


DEFAULT_MODEL_NAME = "default"
"""The name ``/model`` shows for ``llm.model`` itself (the model every session starts with)."""


class ModelSettings(Section):
    """One more model ``/model`` offers (``llm.models``): its own endpoint and key, or the ``llm``
    section's when left out. ``name`` is what the user picks; ``capabilities`` are labels shown
    beside it (``tools``, ``vision``, …)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,32}$")
    model: str = Field(min_length=1)
    base_url: HttpUrl | None = None
    api_key: SecretStr | None = None
    capabilities: list[str] = Field(default_factory=list)
    prices: PriceSettings | None = None


def _distinct_names(models: list[ModelSettings]) -> list[ModelSettings]:
    names = [m.name for m in models]
    if DEFAULT_MODEL_NAME in names:
        raise ValueError(f"{DEFAULT_MODEL_NAME!r} is llm.model's own name; give the entry another name")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"model names must be distinct: {', '.join(twice)} given twice")
    return models


class CompactionSettings(Section):
    """Context compaction (``llm.compaction``, :mod:`runtime.turn.compaction`).

    Off while ``threshold_tokens`` is unset: the right budget depends on the
    model's context window, which agentgram cannot know. About half the
    window is a good value (64000 for a 128k model): the summary call itself
    must fit, and the answer and the tools need room too.
    """

    threshold_tokens: int | None = Field(default=None, ge=1000)
    """Compact once a request's input passes this many tokens (``None``: never)."""
    keep_recent: int = Field(default=6, ge=2, le=200)
    """Messages kept verbatim after the summary (a tool call and its results count as one block)."""

    @property
    def enabled(self) -> bool:
        return self.threshold_tokens is not None


class LLMSettings(Section):
    base_url: HttpUrl = "https://api.openai.com/v1"
    api_key: SecretStr = SecretStr("")
    model: str
    fallback_models: list[str] = Field(default_factory=list)
    max_tool_rounds: int = Field(default=20, ge=1, le=500)
    max_history_messages: int = Field(default=200, ge=2)
    max_tool_result_chars: int | None = Field(default=4000, ge=100)
    request_timeout: Duration = 120.0
    max_retries: int = Field(default=1, ge=0, le=10)
    compaction: CompactionSettings = CompactionSettings()
    prices: PriceSettings | None = None
    """``llm.model``'s prices; ``/cost`` shows a cost only for models with prices."""
    models: Annotated[list[ModelSettings], AfterValidator(_distinct_names)] = Field(default_factory=list)
    """More models ``/model`` switches a session to; ``llm.model`` is always there, as ``default``."""
    max_parallel_subagents: int = Field(default=4, ge=1, le=32)
    """Sub-agents of one parallel batch (``execute_task`` calls) that run at once; 1 runs them in turn."""
    vision: bool = True
    """Photos reach the model as images; ``false``: they are saved and the model is told the path."""
    max_image_px: int = Field(default=2048, ge=64, le=16384)
    """Images are downscaled to this many pixels on the long side before the model sees them."""
    max_history_images: int = Field(default=4, ge=0, le=100)
    """Images of earlier messages re-sent to the model; older ones become ``[image: path]`` lines."""
    inline_text_kb: int = Field(default=32, ge=0, le=1024)
    """A text file this small (KB) that came with a message is also put in the message itself."""


class TranscriptionSettings(Section):
    """Voice notes, audio and video notes through an OpenAI-compatible ``/audio/transcriptions``."""

    enabled: bool = True
    base_url: HttpUrl | None = None
    """``None``: ``llm.base_url``."""
    api_key: SecretStr | None = None
    """``None``: ``llm.api_key``."""
    model: str = "whisper-1"
    language: str | None = None
    """An ISO-639-1 hint (``en``, ``ru``); ``None``: the service detects it."""
    timeout: Duration = 120.0


class StorageSettings(Section):
    url: str = "sqlite+aiosqlite:///./data/agentgram.db"


def memory_file(value: str) -> str:
    """A path inside ``memory/``: relative, without ``..``."""
    parts = Path(value).parts
    if not value.strip() or Path(value).is_absolute() or ".." in parts:
        raise ValueError(f"{value!r} is not a path inside memory/ (relative, without '..')")
    return Path(value).as_posix()


MemoryFile = Annotated[str, AfterValidator(memory_file)]


class AgentSettings(Section):
    workdir: UserPath = Path("./workspace")
    system_prompt_file: UserPath | None = None
    inject_memory: list[MemoryFile] = Field(default_factory=lambda: ["MEMORY.md"])
    """Files under ``memory/`` (in the workdir) added to the static system prompt; see runtime.tools.memory."""
    memory_max_chars: int = Field(default=8000, ge=0)
    """At most this much of the injected memory goes into the prompt (0: none)."""
    agents_dir: UserPath | None = None
    """Where ``<name>/AGENT.md`` agent definitions live; ``agents/`` under the workdir when unset."""
    skills_dirs: list[UserPath] = Field(default_factory=list)
    """Folders of ``<name>/SKILL.md`` Agent Skills besides ``skills/`` in the workdir (runtime.agents.skills)."""
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


class LocaleSettings(Section):
    default: str = "en"


ApprovalAction = Literal["allow", "require", "deny"]
RuleSourceName = Literal["chat", "tic", "cron"]
"""The session sources a rule may be limited to (``runtime.storage.models.SessionSource``)."""

RULE_SOURCE_ALIASES: Mapping[str, RuleSourceName] = {"telegram": "chat"}
"""Other names of a source: ``telegram`` is config.yml's documented name for an interactive chat
(through whichever adapter), so ``source: telegram`` and ``source: chat`` mean the same."""

_DOCUMENTED_RULE_SOURCES = "'telegram', 'tic' or 'cron'"


def rule_source(name: str) -> str:
    """The session source a rule's ``source`` names, its alias resolved."""
    return RULE_SOURCE_ALIASES.get(name, name)


def _known_rule_source(value: object) -> object:
    """A source or an alias, as the source; anything else is refused with the names config.yml documents."""
    if isinstance(value, str) and rule_source(value) in ("chat", "tic", "cron"):
        return rule_source(value)
    raise PydanticCustomError(
        "literal_error", "Input should be {expected}", {"expected": _DOCUMENTED_RULE_SOURCES}
    )


RuleSource = Annotated[RuleSourceName, BeforeValidator(_known_rule_source)]
"""A rule's ``source`` in config.yml: ``telegram`` (or ``chat``), ``tic`` or ``cron``; it holds the source."""


class ApprovalRuleSettings(Section):
    tool: str
    path: str | None = None
    action: ApprovalAction
    priority: int = 100
    source: RuleSource | None = None
    note: str | None = None


class ApprovalSettings(Section):
    rules: list[ApprovalRuleSettings] = Field(default_factory=list)
    timeout: Duration | None = None
    bypass_duration: Duration = 900.0


class MailboxSettings(Section):
    max_unread: int = Field(default=256, ge=1)
    resume_on_message: bool = False


class HookSettings(Section):
    """A wrapper hook's target: a ``command`` (run with ``/bin/sh -c`` in the workdir, JSON on stdin,
    JSON on stdout) or a registered ``tool`` (called with the same JSON as its arguments)."""

    command: str | None = None
    tool: str | None = None
    timeout: Duration = 10.0

    @model_validator(mode="after")
    def _one_target(self) -> HookSettings:
        if (self.command is None) == (self.tool is None):
            raise ValueError("a hook names exactly one of 'command' or 'tool'")
        return self


class TimeoutDecorator(Section):
    seconds: Duration


class RetriesDecorator(Section):
    count: int = Field(ge=1, le=10)
    backoff_ms: int = Field(default=500, ge=0, le=60_000)


class TruncateDecorator(Section):
    max_bytes: int = Field(ge=128)
    """Room for some text and the ``[... truncated: N of M bytes shown ...]`` line (under 90 bytes)."""


class DecoratorSettings(Section):
    """One decorator, written as a one-key mapping: ``{timeout: {seconds: 30}}``,
    ``{retries: {count: 2, backoff_ms: 500}}``, ``{truncate: {max_bytes: 65536}}``,
    ``{before: {command: hooks/check.sh}}``, ``{after: {tool: audit_log}}``."""

    timeout: TimeoutDecorator | None = None
    retries: RetriesDecorator | None = None
    truncate: TruncateDecorator | None = None
    before: HookSettings | None = None
    after: HookSettings | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DecoratorSettings:
        named = [name for name in DECORATOR_NAMES if getattr(self, name) is not None]
        if len(named) != 1:
            raise ValueError(f"a decorator is exactly one of {', '.join(DECORATOR_NAMES)}")
        return self

    @property
    def name(self) -> str:
        return next(name for name in DECORATOR_NAMES if getattr(self, name) is not None)


DECORATOR_NAMES = ("timeout", "retries", "truncate", "before", "after")


class WrapperMatch(Section):
    tool: str = "*"
    """A glob on the name the model calls (``execute_cmd``, ``mcp__github__*``, ``*``)."""


class WrapperSettings(Section):
    match: WrapperMatch = WrapperMatch()
    decorators: list[DecoratorSettings] = Field(min_length=1)


class ToolsSettings(Section):
    attach_seconds: Duration = 30.0
    """A command still running after this long is detached: the turn goes on, its result comes as mail."""
    attach_overrides: dict[str, Duration] = Field(default_factory=dict)
    """Per tool name: its own ``attach_seconds``."""
    max_wait_seconds: Duration = 300.0
    """The cap on ``wait`` and ``get_tool_call_status``'s timeouts."""
    wrappers: list[WrapperSettings] = Field(default_factory=list)
    """Decorators around tool execution; every matching entry applies, in file order, first outermost."""

    def attach_for(self, tool: str) -> float:
        return self.attach_overrides.get(tool, self.attach_seconds)


class QuietHours(Section):
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


class QuietHoursSettings(Section):
    range: Annotated[QuietHours | None, BeforeValidator(QuietHours.parse)] = None
    hold: bool = False


class TicSettings(Section):
    enabled: bool = True
    interval: Duration = 1800.0
    cron: str | None = None
    prompt: str | None = None
    chat_id: int | None = None


class SchedulerSettings(Section):
    misfire_grace: Duration = 3600.0


MCP_SERVER_NAME = r"^(?=.{1,32}$)[a-z0-9]+(?:[-_][a-z0-9]+)*$"
"""A server's name becomes part of its tools' names (``mcp__<server>__<tool>``): no ``__`` in it
(nor a ``_`` or ``-`` at its ends), so ``mcp__a__*`` names only server ``a``'s tools and two
servers' tool names cannot come out the same."""


class McpServerSettings(Section):
    """One MCP server (``mcp.servers.<name>``): a stdio ``command`` or a streamable HTTP ``url``.

    ``env`` and ``headers`` are secrets (tokens live there), masked wherever the config is shown."""

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    cwd: UserPath | None = None
    url: HttpUrl | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    description: str | None = None
    """One line the model reads before it activates a lazy server (default: ``MCP server <name>``)."""
    enabled: bool = True
    lazy: bool = True
    """Start and list on first use; ``false``: at start, its tools offered from the first turn."""
    timeout: Duration = 60.0
    """Per call; a start may take the longer of this and ``START_TIMEOUT`` (runtime.mcp.servers)."""
    approval: ApprovalAction | None = None
    """A rule for every tool of this server; ``None``: the approval rules decide (no match asks)."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server names exactly one of 'command' (stdio) or 'url' (HTTP)")
        return self


def _server_names(servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
    bad = sorted(name for name in servers if not re.fullmatch(MCP_SERVER_NAME, name))
    if bad:
        raise ValueError(
            f"server names are 1-32 of a-z, 0-9, and single '_' or '-' between them: {', '.join(map(repr, bad))}"
        )
    return servers


class McpSettings(Section):
    servers: Annotated[dict[str, McpServerSettings], AfterValidator(_server_names)] = Field(
        default_factory=dict
    )


class LoggingSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    redact_payloads: bool = True
    libraries: bool = False  # aiosqlite, httpx, telegram, … log below WARNING only at DEBUG with this on
    format: Literal["text", "json"] = "text"


class Settings(Section):
    """The core's sections. An adapter extends it with its own (``bot.settings.BotSettings`` adds
    ``telegram``), so one config file holds both and is validated once, by the adapter's model."""

    llm: LLMSettings
    transcription: TranscriptionSettings = TranscriptionSettings()
    storage: StorageSettings = StorageSettings()
    agent: AgentSettings = AgentSettings()
    locale: LocaleSettings = LocaleSettings()
    approval: ApprovalSettings = ApprovalSettings()
    tools: ToolsSettings = ToolsSettings()
    mailbox: MailboxSettings = MailboxSettings()
    quiet_hours: QuietHoursSettings = QuietHoursSettings()
    tic: TicSettings = TicSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    logging: LoggingSettings = LoggingSettings()
    mcp: McpSettings = McpSettings()
    _config_file: Path | None = PrivateAttr(default=None)  # not a key: set by parse_config

    @property
    def config_file(self) -> Path | None:
        """The resolved file these settings were read from (``None`` when built from a mapping)."""
        return self._config_file


# --- loading ----------------------------------------------------------------


class ConfigInvalid(ConfigError):
    """Every problem found in one config, one :class:`ConfigError` line each."""

    def __init__(self, problems: Iterable[ConfigError]) -> None:
        unique = {str(problem): problem for problem in problems}
        self.problems: tuple[ConfigError, ...] = tuple(unique.values())
        first = self.problems[0] if self.problems else ConfigError("", "invalid configuration")
        super().__init__(first.key, first.problem)
        self.args = ("\n".join(unique) or str(first),)

    def __str__(self) -> str:
        return str(self.args[0])


Loc = tuple[str, ...]


def _loc(key: str) -> Loc:
    return tuple(key.split(".")) if key else ()


@dataclass(slots=True)
class Origins:
    """Which keys took their value from the environment, so an error can name the variable."""

    variables: dict[Loc, str] = field(default_factory=dict)

    def source_of(self, key: str) -> str | None:
        """The variable behind ``key`` or the nearest enclosing key (a list set as a whole)."""
        loc = _loc(key)
        for end in range(len(loc), 0, -1):
            if loc[:end] in self.variables:
                return self.variables[loc[:end]]
        return None

    def problem(self, key: str, problem: str) -> ConfigError:
        """One error line for ``key``, naming the environment variable that set it, if any."""
        source = self.source_of(key)
        return ConfigError(key, f"{problem} (set by {source})" if source else problem)

    def overridden(self, loc: Loc, name: str) -> None:
        """``name`` replaced the whole value at ``loc``: what the file said below it is gone."""
        for known in [k for k in self.variables if k[: len(loc)] == loc]:
            del self.variables[known]
        self.variables[loc] = name


SettingsT = TypeVar("SettingsT", bound=Settings)


@overload
def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Settings: ...
@overload
def load_config(
    path: Path, environ: Mapping[str, str] | None = None, *, model: type[SettingsT]
) -> SettingsT: ...
def load_config(
    path: Path, environ: Mapping[str, str] | None = None, *, model: type[Settings] = Settings
) -> Settings:
    """Read, expand, override and validate against ``model`` (an adapter passes its own, which
    extends :class:`Settings`); raise :class:`ConfigInvalid` listing every problem."""
    return parse_config(path, environ, model=model)[0]


@overload
def parse_config(path: Path, environ: Mapping[str, str] | None = None) -> tuple[Settings, Origins]: ...
@overload
def parse_config(
    path: Path, environ: Mapping[str, str] | None = None, *, model: type[SettingsT]
) -> tuple[SettingsT, Origins]: ...
def parse_config(
    path: Path, environ: Mapping[str, str] | None = None, *, model: type[Settings] = Settings
) -> tuple[Settings, Origins]:
    """:func:`load_config` plus the :class:`Origins` the semantic checks report through."""
    env = os.environ if environ is None else environ
    settings, origins = _from_mapping(_read_yaml(path), env, model)
    settings._config_file = path.expanduser().resolve()  # the file tools must never read it
    return settings, origins


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigInvalid([ConfigError("", f"cannot read {path}: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise ConfigInvalid([ConfigError("", f"{path} is not UTF-8 text")]) from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigInvalid([ConfigError("", yaml_problem(path, exc))]) from None
    if not isinstance(raw, dict):
        raise ConfigInvalid([ConfigError("", f"{path} must hold a mapping of sections")])
    return raw


def yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """``config.yml:12:3: mapping values are not allowed here`` — one line, positions 1-based."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        line = f"{path}:{mark.line + 1}:{mark.column + 1}: {exc.problem or 'invalid YAML'}"
        if exc.context and exc.context_mark is not None:
            started = exc.context_mark
            line += f" ({exc.context} at {started.line + 1}:{started.column + 1})"
        return line
    first = str(exc).strip().splitlines()
    return f"{path} is not valid YAML: {first[0] if first else type(exc).__name__}"


@overload
def settings_from_mapping(raw: dict[str, Any], env: Mapping[str, str]) -> Settings: ...
@overload
def settings_from_mapping(
    raw: dict[str, Any], env: Mapping[str, str], *, model: type[SettingsT]
) -> SettingsT: ...
def settings_from_mapping(
    raw: dict[str, Any], env: Mapping[str, str], *, model: type[Settings] = Settings
) -> Settings:
    """Validate already-read config data; raise :class:`ConfigInvalid` listing every problem."""
    return _from_mapping(raw, env, model)[0]


def _from_mapping(
    raw: dict[str, Any], env: Mapping[str, str], model: type[SettingsT]
) -> tuple[SettingsT, Origins]:
    origins = Origins()
    unset: dict[Loc, ConfigError] = {}
    data = _expand(raw, env, (), origins, unset)
    _apply_overrides(data, env, origins, unset)
    try:
        settings = model.model_validate(data)
    except ValidationError as exc:
        problems = [*unset.values()]
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            if not _under(_loc(key), unset):  # its value is missing: the unset variable says why
                problems.append(origins.problem(key, _problem(error)))
        raise ConfigInvalid(problems) from None
    if unset:
        raise ConfigInvalid(unset.values())
    return settings, origins


def _under(loc: Loc, roots: Mapping[Loc, object]) -> bool:
    return any(loc[: len(root)] == root for root in roots)


def _problem(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known key"
    if kind in ("literal_error", "enum"):
        return f"{error['input']!r} is not one of {error.get('ctx', {}).get('expected', '?')}"
    message = str(error["msg"])
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _expand(
    value: Any, env: Mapping[str, str], loc: Loc, origins: Origins, unset: dict[Loc, ConfigError]
) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, env, (*loc, str(k)), origins, unset) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, (*loc, str(i)), origins, unset) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    names = _ENV_REF.findall(value)
    if not names:
        return value
    missing = [name for name in dict.fromkeys(names) if name not in env]
    if missing:
        which = ", ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        unset[loc] = ConfigError(".".join(loc), f"environment variable {which} {verb} not set")
        return value
    origins.variables[loc] = ", ".join("${" + name + "}" for name in dict.fromkeys(names))
    return _ENV_REF.sub(lambda match: env[match.group(1)], value)


def _apply_overrides(
    data: dict[str, Any], env: Mapping[str, str], origins: Origins, unset: dict[Loc, ConfigError]
) -> None:
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
        loc = tuple(path)
        origins.overridden(loc, name)
        for replaced in [k for k in unset if k[: len(loc)] == loc]:
            del unset[replaced]  # the override replaced the value that named an unset variable


def masked(settings: Settings) -> dict[str, Any]:
    """The effective config as plain data with every secret replaced by ``***``."""
    return settings.model_dump(mode="json")  # SecretStr dumps as '**********'
