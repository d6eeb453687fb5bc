"""The core's typed configuration, validated where it enters.

``read_config`` reads YAML, expands ``${ENV_VAR}`` inside values, applies
``AGENTGRAM_SECTION__KEY`` environment overrides, moves the ``advanced:``
section's knobs to their sections and validates the result with pydantic
against :class:`Settings`, the core's sections — or against the root model an
adapter extends it to (``bot.settings.AgentgramSettings`` adds ``telegram``,
``web`` and ``terminal``): the core knows no chat platform, and the file keeps
one format. The rest of the code only ever sees typed settings.

What reading decides, and why:

* **Every problem in one pass.** Each becomes one :class:`~runtime.errors.ConfigError`
  line naming the key (and the environment variable when one supplied the
  value), sorted in the file's key order (:func:`key_order`); an unknown key
  gets "did you mean …" from the keys known at its place (difflib). The
  values that are valid still make :attr:`Parsed.usable` settings (each
  invalid one left at its default), so the semantic checks
  (:mod:`runtime.config_check`) report in the same pass.
* **Relative paths are relative to the config file's folder**, never to the
  working directory (``UserPath`` and ``storage.url``'s SQLite file, through
  the ``config_dir`` validation context); settings built from a mapping (tests)
  keep them relative.
* **Tuning knobs nobody should need** are fields marked :func:`advanced`. The
  file writes them under ``advanced.<section>.<key>``; the models keep them in
  their sections, so the code reads ``settings.telegram.poll_timeout`` as
  before. At its old place a knob still works, with a one-line deprecation
  warning (:class:`ConfigWarning`) naming both keys.
* **An API key may be empty** for any endpoint but api.openai.com: an unset
  variable there is sent empty with a warning; for OpenAI's own it stays an
  error.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import time
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args, get_origin, overload
from urllib.parse import urlsplit

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
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

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

CONFIG_DIR = "config_dir"
"""The validation context's key for the folder of the config file being read (module docstring)."""


def config_dir(info: ValidationInfo) -> Path | None:
    """The folder relative paths resolve against, when the values come from a file."""
    context = info.context
    base = context.get(CONFIG_DIR) if isinstance(context, Mapping) else None
    return base if isinstance(base, Path) else None


def _user_path(value: Path, info: ValidationInfo) -> Path:
    path = value.expanduser()
    base = config_dir(info)
    return path if path.is_absolute() or base is None else base / path


UserPath = Annotated[Path, AfterValidator(_user_path)]
"""A path where ``~`` means the home directory; a relative path is relative to the config file's
folder (to the working directory only for settings built from a mapping, as tests do)."""

OPENAI_HOST = "api.openai.com"
"""OpenAI's own endpoint: the one place an API key is certainly needed."""


def is_openai(base_url: str | None) -> bool:
    return base_url is not None and (urlsplit(base_url).hostname or "").lower() == OPENAI_HOST


def advanced(default: Any, **kwargs: Any) -> Any:
    """A tuning knob nobody should need: written under ``advanced.<section>.<key>`` in the file,
    read as ``settings.<section>.<key>`` by the code (see :func:`relocate_advanced`)."""
    return Field(default, json_schema_extra={ADVANCED: True}, **kwargs)


ADVANCED = "advanced"


def is_advanced(field_info: FieldInfo) -> bool:
    extra = field_info.json_schema_extra
    return isinstance(extra, dict) and extra.get(ADVANCED) is True


class Section(BaseModel):
    """A config section: unknown keys are errors, values never change once read. A field's
    docstring is its description (the generated configuration reference shows it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class PriceSettings(Section):
    """What a model costs per million tokens, in whatever currency the provider bills (``/cost``)."""

    input: float = Field(ge=0)
    """Per million input tokens."""
    output: float = Field(ge=0)
    """Per million output tokens."""


DEFAULT_MODEL_NAME = "default"
"""The name ``/model`` shows for ``llm.model`` itself (the model every session starts with)."""


class ModelSettings(Section):
    """One more model ``/model`` offers (``llm.models``): its own endpoint and key, or the ``llm``
    section's when left out. ``name`` is what the user picks; ``capabilities`` are labels shown
    beside it (``tools``, ``vision``, …)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,32}$")
    """What ``/model`` shows and the user picks (letters, digits, ``-`` and ``_``)."""
    model: str = Field(min_length=1)
    """The model name as its endpoint knows it."""
    base_url: HttpUrl | None = None
    """``None``: ``llm.base_url``."""
    api_key: SecretStr | None = None
    """``None``: ``llm.api_key``."""
    capabilities: list[str] = Field(default_factory=list)
    """Labels shown in ``/model`` (``tools``, ``vision``, …)."""
    prices: PriceSettings | None = None
    """Per million tokens, for ``/cost``; ``None``: tokens only."""


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
    """The OpenAI-compatible endpoint every turn talks to."""

    base_url: HttpUrl = f"https://{OPENAI_HOST}/v1"
    """Any OpenAI-compatible endpoint (OpenRouter, Ollama ``http://localhost:11434/v1``, vLLM, LM Studio)."""
    api_key: SecretStr = SecretStr("")
    """The endpoint's API key; may be empty (or an unset variable) for any endpoint but api.openai.com."""
    model: str
    """The model name as the endpoint knows it."""
    fallback_models: list[str] = Field(default_factory=list)
    """Tried in order on 429 / 5xx / timeouts / connection errors."""
    max_tool_rounds: int = Field(default=20, ge=1, le=500)
    """LLM rounds per turn before giving up ("Exceeded N tool-call rounds...")."""
    max_history_messages: int = Field(default=200, ge=2)
    """Messages of history sent per request (a tool call is never split from its result)."""
    max_tool_result_chars: int | None = advanced(4000, ge=100)
    """Earlier turns' tool results longer than this are hidden from the model (kept in the database)."""
    request_timeout: Duration = 120.0
    """Seconds per LLM request."""
    max_retries: int = advanced(1, ge=0, le=10)
    """Retries of a retriable error on the same model before falling back."""
    compaction: CompactionSettings = CompactionSettings()
    """Summarise older history instead of dropping it."""
    prices: PriceSettings | None = None
    """``llm.model``'s prices; ``/cost`` shows a cost only for models with prices."""
    models: Annotated[list[ModelSettings], AfterValidator(_distinct_names)] = Field(default_factory=list)
    """More models ``/model`` switches a session to; ``llm.model`` is always there, as ``default``."""
    max_parallel_subagents: int = advanced(4, ge=1, le=32)
    """Sub-agents of one parallel batch (``execute_task`` calls) that run at once; 1 runs them in turn."""
    vision: bool = True
    """Photos reach the model as images; ``false``: they are saved and the model is told the path."""
    max_image_px: int = advanced(2048, ge=64, le=16384)
    """Images are downscaled to this many pixels on the long side before the model sees them."""
    max_history_images: int = advanced(4, ge=0, le=100)
    """Images of earlier messages re-sent to the model; older ones become ``[image: path]`` lines."""
    inline_text_kb: int = advanced(32, ge=0, le=1024)
    """A text file this small (KB) that came with a message is also put in the message itself."""


class TranscriptionSettings(Section):
    """Voice notes, audio and video notes through an OpenAI-compatible ``/audio/transcriptions``."""

    enabled: bool = True
    """``false``: voice notes are saved, not transcribed."""
    base_url: HttpUrl | None = None
    """An endpoint with ``/audio/transcriptions``; ``None``: ``llm.base_url``."""
    api_key: SecretStr | None = None
    """``None``: ``llm.api_key``."""
    model: str = "whisper-1"
    """E.g. whisper-1, gpt-4o-mini-transcribe, or what a local server offers."""
    language: str | None = None
    """An ISO-639-1 hint (``en``, ``ru``); ``None``: the service detects it."""
    timeout: Duration = advanced(120.0)
    """Seconds per transcription."""


DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/agentgram.db"


class StorageSettings(Section):
    """Where sessions, history, mail and schedules are kept."""

    url: str = Field(default=DEFAULT_DATABASE_URL, validate_default=True)
    """A SQLAlchemy async URL: ``sqlite+aiosqlite:///path.db`` or ``postgresql+asyncpg://user:pass@host/db``
    (both drivers come with agentgram); a relative SQLite path is relative to the config file's folder."""
    pool_size: int = Field(default=10, ge=1, le=1000)
    """PostgreSQL only: connections kept open to the database (at most twice as many under load).
    Each running turn, the mailbox and the web view take one while they read or write; the instance
    lock holds one more for the whole run. Raise it for many concurrent chats, within the server's
    ``max_connections``. SQLite ignores it (one writer, reads on their own connections)."""
    migrate: Literal["auto", "never"] = "auto"
    """``auto``: bring the database's schema to this release's at start (Alembic; concurrent starts
    upgrade once). ``never``: refuse to start unless it is there already, and run
    ``agentgram db upgrade`` yourself (for a database shared by several hosts, or a DBA's review)."""

    @field_validator("url")
    @classmethod
    def _relative_to_the_config(cls, value: str, info: ValidationInfo) -> str:
        base = config_dir(info)
        database = sqlite_path(value)
        if base is None or database is None or database.is_absolute():
            return value
        return make_url(value).set(database=str(base / database)).render_as_string(hide_password=False)


class ClusterSettings(Section):
    """Several agentgram processes on one PostgreSQL database (:mod:`runtime.infra.cluster`).

    Each process registers an instance row with a heartbeat written in the database's time. One
    instance leads through a fenced lease another instance takes once the leader's heartbeat is
    older than ``lease_ttl``. Polling, the leader polls and runs every session and the scheduler
    while the others wait as standbys (:mod:`runtime.infra.lead`); in webhook mode the instances
    share the chats, each run by the instance holding its lease, and the leader runs the scheduler
    (:mod:`runtime.infra.ownership`; docs/operations/cluster.md). SQLite is one process's database:
    ``enabled`` needs a PostgreSQL ``storage.url``."""

    enabled: bool = False
    """``true``: this process is one of several instances sharing ``storage.url`` (PostgreSQL only)."""
    lease_ttl: Duration = 10.0
    """An instance whose heartbeat is older than this is dead: another takes over its lead and its chats."""
    heartbeat: Duration = Field(default=3.0, validate_default=True)  # checked against lease_ttl
    """How often an instance writes its heartbeat; shorter than ``lease_ttl`` (a third of it or less
    keeps a slow beat or two from costing the leases)."""
    instance_name: str | None = Field(default=None, min_length=1, max_length=128)
    """What logs and the web view call this instance; ``None``: ``<hostname>-<pid>``."""

    @field_validator("heartbeat")
    @classmethod
    def _shorter_than_the_ttl(cls, value: float, info: ValidationInfo) -> float:
        ttl = info.data.get("lease_ttl")  # absent when lease_ttl itself is invalid (reported there)
        if isinstance(ttl, float) and value >= ttl:
            raise ValueError(f"must be shorter than cluster.lease_ttl ({ttl:g}s), not {value:g}s")
        return value

    def name(self) -> str:
        """``instance_name``, or ``<hostname>-<pid>`` of this process."""
        return self.instance_name or f"{socket.gethostname()}-{os.getpid()}"


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (``~`` expanded, not resolved); ``None`` for another database,
    an in-memory one or a URL that does not parse."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    if parsed.database.startswith("file:"):
        return None
    return Path(parsed.database).expanduser()


def memory_file(value: str) -> str:
    """A path inside ``memory/``: relative, without ``..``."""
    parts = Path(value).parts
    if not value.strip() or Path(value).is_absolute() or ".." in parts:
        raise ValueError(f"{value!r} is not a path inside memory/ (relative, without '..')")
    return Path(value).as_posix()


MemoryFile = Annotated[str, AfterValidator(memory_file)]


class AgentSettings(Section):
    """The agent's workdir, prompt, memory, agents and skills."""

    workdir: UserPath = Field(default=Path("./workspace"), validate_default=True)
    """Where the agent's file tools and shell commands run."""
    system_prompt_file: UserPath | None = None
    """A file replacing the built-in system prompt."""
    inject_memory: list[MemoryFile] = Field(default_factory=lambda: ["MEMORY.md"])
    """Files under ``memory/`` (in the workdir) added to the static system prompt; see runtime.tools.memory."""
    memory_max_chars: int = advanced(8000, ge=0)
    """At most this much of the injected memory goes into the prompt (0: none)."""
    agents_dir: UserPath | None = None
    """Where ``<name>/AGENT.md`` agent definitions live; ``agents/`` under the workdir when unset."""
    skills_dirs: list[UserPath] = Field(default_factory=list)
    """Folders of ``<name>/SKILL.md`` Agent Skills besides ``skills/`` in the workdir (runtime.agents.skills)."""
    timezone: str | None = None
    """IANA zone for dates, schedules and quiet hours; ``None``: the OS zone."""
    max_mail_hops: int = Field(default=16, ge=1, le=1000)
    """Mail between sessions carries how many replies deep it is (the mail it answers' count plus
    one; a user's message starts at 0); ``send_message`` refuses past this (runtime.core.peers)."""
    max_watches: int = advanced(8, ge=1, le=100)
    """Watches (``watch_session``) one session may hold at once."""
    queued_default: Literal["inject", "after"] = "inject"
    """What becomes of a message sent while the agent works, until the user presses one of its
    buttons (⚡ Now, ⏭ After, 🗑 Cancel): ``inject`` folds it into the running turn at its next
    step, ``after`` keeps it for a turn of its own once this one ends."""

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
    """The language of the bot's own words."""

    default: str = "en"
    """The language when the user's own has no translation (en, ru)."""


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
    """One approval rule; the first match by priority wins."""

    tool: str
    """A tool name, a glob (``mcp__github__*``) or a group (``@fs_write``)."""
    path: str | None = None
    """A glob on the call's path or command (``git status*``, ``notes/**``); ``None``: any."""
    action: ApprovalAction
    """``allow`` without asking, ``require`` asking, or ``deny``."""
    priority: int = 100
    """Lower first."""
    source: RuleSource | None = None
    """Only for sessions of this source; ``None``: every source."""
    note: str | None = None
    """Why the rule is there (shown with it)."""


class ApprovalSettings(Section):
    """Which tool calls ask first (the built-in rules, plus these)."""

    rules: list[ApprovalRuleSettings] = Field(default_factory=list)
    """Extra rules besides the built-in ones."""
    timeout: Duration | None = None
    """Unanswered approval prompts expire after this long; ``None``: never."""
    bypass_duration: Duration = 900.0
    """How long "⏱ 15 min" trusts a tool group for the session."""


class MailboxSettings(Section):
    """Each session's mailbox of messages and results."""

    max_unread: int = advanced(256, ge=1)
    """Unread messages per session before new ones are refused."""
    resume_on_message: bool = False
    """``true``: a new message also resumes a paused turn."""


class HookSettings(Section):
    """A wrapper hook's target: a ``command`` (run with ``/bin/sh -c`` in the workdir, JSON on stdin,
    JSON on stdout) or a registered ``tool`` (called with the same JSON as its arguments)."""

    command: str | None = None
    """A shell command, run in the workdir: JSON on stdin, JSON on stdout."""
    tool: str | None = None
    """A registered tool, called with the same JSON as its arguments."""
    timeout: Duration = 10.0
    """How long the hook may take."""

    @model_validator(mode="after")
    def _one_target(self) -> HookSettings:
        if (self.command is None) == (self.tool is None):
            raise ValueError("a hook names exactly one of 'command' or 'tool'")
        return self


class TimeoutDecorator(Section):
    """Stop the call (and its processes) after this long."""

    seconds: Duration
    """The limit."""


class RetriesDecorator(Section):
    """Retry a failed call (only tools that only read are retried)."""

    count: int = Field(ge=1, le=10)
    """Retries after the first try."""
    backoff_ms: int = Field(default=500, ge=0, le=60_000)
    """Milliseconds before the first retry, doubled each time."""


class TruncateDecorator(Section):
    """Cut every result to a size."""

    max_bytes: int = Field(ge=128)
    """Room for some text and the ``[... truncated: N of M bytes shown ...]`` line (under 90 bytes)."""


class DecoratorSettings(Section):
    """One decorator, written as a one-key mapping: ``{timeout: {seconds: 30}}``,
    ``{retries: {count: 2, backoff_ms: 500}}``, ``{truncate: {max_bytes: 65536}}``,
    ``{before: {command: hooks/check.sh}}``, ``{after: {tool: audit_log}}``."""

    timeout: TimeoutDecorator | None = None
    """Stop the call after ``seconds``."""
    retries: RetriesDecorator | None = None
    """Retry a failed call ``count`` times."""
    truncate: TruncateDecorator | None = None
    """Cut the result to ``max_bytes``."""
    before: HookSettings | None = None
    """A hook that sees the call first: allow, deny, rewrite it or answer it."""
    after: HookSettings | None = None
    """A hook that sees the result; its failure is ignored."""

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
    """Which tools a wrapper applies to."""

    tool: str = "*"
    """A glob on the name the model calls (``execute_cmd``, ``mcp__github__*``, ``*``)."""


class WrapperSettings(Section):
    """Decorators around the calls of the tools that ``match``."""

    match: WrapperMatch = WrapperMatch()
    """Which tools."""
    decorators: list[DecoratorSettings] = Field(min_length=1)
    """Applied in order, the first outermost."""


class ToolsSettings(Section):
    """How tool calls run: detaching long commands, and wrappers around calls."""

    attach_seconds: Duration = 30.0
    """A command still running after this long is detached: the turn goes on, its result comes as mail."""
    attach_overrides: dict[str, Duration] = Field(default_factory=dict)
    """Per tool name: its own ``attach_seconds``."""
    max_wait_seconds: Duration = advanced(300.0)
    """The cap on ``wait`` and ``get_tool_call_status``'s timeouts."""
    wrappers: list[WrapperSettings] = Field(default_factory=list)
    """Decorators around tool execution; every matching entry applies, in file order, first outermost."""
    checkpoint_commands: bool = False
    """``true``: a command's effect on the workdir is checkpointed too (``/rollback``), not only
    ``write_file`` and ``edit_file``; costs a scan of the workdir before and after each command."""
    checkpoint_max_mb: float = Field(default=10.0, gt=0)
    """Files larger than this are not checkpointed (listed as skipped instead)."""
    checkpoint_keep_days: float = Field(default=7.0, gt=0)
    """Checkpoints of turns older than this are pruned (they can no longer be rolled back)."""
    checkpoint_dir: UserPath | None = None
    """Where checkpoints are kept (outside the workdir); ``None``: ``checkpoints/`` beside the
    SQLite database, or ``.<workdir name>.checkpoints`` beside the workdir for another database."""

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
    """Hours when tics do not run and cron results stay silent."""

    range: Annotated[QuietHours | None, BeforeValidator(QuietHours.parse)] = None
    """E.g. ``"23:00-07:00"`` in ``agent.timezone``: no tics, cron results silent; ``None``: none."""
    hold: bool = False
    """``true``: hold cron results during quiet hours and send one digest after."""


class TicSettings(Section):
    """Periodic check-ins (the agent's own turns, ``TIC.md``)."""

    enabled: bool = True
    """Periodic check-ins (run only when TIC.md, ``tic.prompt`` or pending events give them work)."""
    interval: Duration = 1800.0
    """How often; ignored when ``cron`` is set."""
    cron: str | None = None
    """A crontab instead of ``interval``, e.g. ``"0 9-18 * * 1-5"``."""
    prompt: str | None = None
    """An extra instruction for every tic."""
    chat_id: int | None = None
    """Where reports go; ``None``: the first allowed user."""


class SchedulerSettings(Section):
    """The scheduler of tics and cron jobs."""

    misfire_grace: Duration = advanced(3600.0)
    """Runs missed while the bot was down are run once on start if this recent."""


MCP_SERVER_NAME = r"^(?=.{1,32}$)[a-z0-9]+(?:[-_][a-z0-9]+)*$"
"""A server's name becomes part of its tools' names (``mcp__<server>__<tool>``): no ``__`` in it
(nor a ``_`` or ``-`` at its ends), so ``mcp__a__*`` names only server ``a``'s tools and two
servers' tool names cannot come out the same."""


class McpServerSettings(Section):
    """One MCP server (``mcp.servers.<name>``): a stdio ``command`` or a streamable HTTP ``url``.

    ``env`` and ``headers`` are secrets (tokens live there), masked wherever the config is shown."""

    command: str | None = Field(default=None, min_length=1)
    """stdio: the command the runtime starts and keeps open (e.g. ``uvx``)."""
    args: list[str] = Field(default_factory=list)
    """The command's arguments."""
    env: dict[str, SecretStr] = Field(default_factory=dict)
    """Extra environment variables (masked when the config is shown)."""
    cwd: UserPath | None = None
    """The server's working directory; ``None``: agentgram's."""
    url: HttpUrl | None = None
    """Streamable HTTP: the server's URL."""
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    """HTTP headers, e.g. ``Authorization`` (masked when the config is shown)."""
    description: str | None = None
    """One line the model reads before it activates a lazy server (default: ``MCP server <name>``)."""
    enabled: bool = True
    """``false``: the server is not started, its tools not offered."""
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
    """Model Context Protocol tool servers."""

    servers: Annotated[dict[str, McpServerSettings], AfterValidator(_server_names)] = Field(
        default_factory=dict
    )
    """Model Context Protocol tool servers by name (a-z, 0-9, ``_`` and ``-``); their tools are
    named ``mcp__<server>__<tool>``."""


class LoggingSettings(Section):
    """The log on stderr."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """The least severe level logged."""
    redact_payloads: bool = True
    """Log message and tool payloads as sizes only (secrets are always masked)."""
    libraries: bool = False
    """With ``level: DEBUG``, also the libraries' debug lines (aiosqlite, aiohttp, httpx, telegram, openai, …)."""
    format: Literal["text", "json"] = "text"
    """``text``, or ``json``: one JSON object a line (time, level, logger, message, fields)."""


class Settings(Section):
    """The core's sections. An adapter extends it with its own (``bot.settings.BotSettings`` adds
    ``telegram``), so one config file holds both and is validated once, by the adapter's model."""

    llm: LLMSettings
    transcription: TranscriptionSettings = TranscriptionSettings()
    storage: StorageSettings = StorageSettings()
    cluster: ClusterSettings = ClusterSettings()
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

    def __init__(self, problems: Iterable[ConfigError], warnings: Iterable[ConfigWarning] = ()) -> None:
        unique = {str(problem): problem for problem in problems}
        self.problems: tuple[ConfigError, ...] = tuple(unique.values())
        self.warnings: tuple[ConfigWarning, ...] = tuple(warnings)
        first = self.problems[0] if self.problems else ConfigError("", "invalid configuration")
        super().__init__(first.key, first.problem)
        self.args = ("\n".join(unique) or str(first),)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class ConfigWarning:
    """Something the config does that works but probably is not meant (one line, like an error)."""

    key: str
    problem: str

    def __str__(self) -> str:
        return (
            f"config warning: {self.key}: {self.problem}" if self.key else f"config warning: {self.problem}"
        )


Loc = tuple[str, ...]


def key_loc(key: str) -> Loc:
    return tuple(key.split(".")) if key else ()


@dataclass(slots=True)
class Origins:
    """Which keys took their value from the environment, so an error can name the variable; and
    where in the file a value was written when that is not its key (``advanced.<section>.<key>``)."""

    variables: dict[Loc, str] = field(default_factory=dict)
    written: dict[Loc, Loc] = field(default_factory=dict)

    def file_key(self, key: str) -> str:
        """``key`` as the file spells it (a relocated advanced key under ``advanced.``)."""
        loc = key_loc(key)
        for end in range(len(loc), 0, -1):
            if loc[:end] in self.written:
                return ".".join(self.written[loc[:end]] + loc[end:])
        return key

    def source_of(self, key: str) -> str | None:
        """The variable behind ``key`` or the nearest enclosing key (a list set as a whole)."""
        loc = key_loc(self.file_key(key))
        for end in range(len(loc), 0, -1):
            if loc[:end] in self.variables:
                return self.variables[loc[:end]]
        return None

    def problem(self, key: str, problem: str) -> ConfigError:
        """One error line for ``key``, naming the environment variable that set it, if any."""
        source = self.source_of(key)
        return ConfigError(self.file_key(key), f"{problem} (set by {source})" if source else problem)

    def overridden(self, loc: Loc, name: str) -> None:
        """``name`` replaced the whole value at ``loc``: what the file said below it is gone."""
        for known in [k for k in self.variables if k[: len(loc)] == loc]:
            del self.variables[known]
        self.variables[loc] = name


SettingsT = TypeVar("SettingsT", bound=Settings)


@dataclass(slots=True)
class Parsed(Generic[SettingsT]):
    """What reading one config found: the settings (``None`` unless every value is valid), every
    problem and warning, and :attr:`usable` — the settings with each invalid value left at its
    default, so that the semantic checks can still run and report in the same pass (``None``
    when a required value is missing or wrong)."""

    settings: SettingsT | None
    usable: SettingsT | None
    origins: Origins
    problems: list[ConfigError]
    warnings: list[ConfigWarning]


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
    parsed = read_config(path, environ, model=model)
    if parsed.settings is None or parsed.problems:
        raise ConfigInvalid(parsed.problems, parsed.warnings)
    return parsed.settings, parsed.origins


Prepare = Callable[[dict[str, Any]], dict[str, Any]]
"""An adapter's edit of the expanded data before it is validated (``agentgram chat`` drops a
``telegram`` section without a token)."""


def read_config(
    path: Path,
    environ: Mapping[str, str] | None = None,
    *,
    model: type[SettingsT],
    prepare: Prepare | None = None,
) -> Parsed[SettingsT]:
    """Read ``path`` and validate it against ``model``, collecting every problem; never raises.

    Relative paths resolve against the file's folder (the ``config_dir`` validation context);
    the settings remember the file (:attr:`Settings.config_file`)."""
    env = os.environ if environ is None else environ
    file = path.expanduser().resolve()
    try:
        raw = _read_yaml(path)
    except ConfigInvalid as invalid:
        return Parsed(None, None, Origins(), list(invalid.problems), [])
    parsed = parse_mapping(raw, env, model=model, base=file.parent, prepare=prepare)
    for settings in {id(s): s for s in (parsed.settings, parsed.usable) if s is not None}.values():
        settings._config_file = file  # the file tools must never read it
    return parsed


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
    """Validate already-read config data (relative paths stay relative to the working directory);
    raise :class:`ConfigInvalid` listing every problem. Warnings are not shown on this path."""
    parsed = parse_mapping(raw, env, model=model)
    if parsed.settings is None or parsed.problems:
        raise ConfigInvalid(parsed.problems, parsed.warnings)
    return parsed.settings


def parse_mapping(
    raw: dict[str, Any],
    env: Mapping[str, str],
    *,
    model: type[SettingsT],
    base: Path | None = None,
    prepare: Prepare | None = None,
) -> Parsed[SettingsT]:
    """Expand, override, relocate and validate config data, collecting every problem; relative
    paths resolve against ``base`` (the config's folder) when given. Never raises."""
    origins = Origins()
    unset: dict[Loc, ConfigError] = {}
    warnings: list[ConfigWarning] = []
    data = _expand(raw, env, (), origins, unset)
    _apply_overrides(data, env, origins, unset)
    _lenient_api_keys(data, unset, warnings)
    if prepare is not None:
        data = prepare(data)
    problems = [*unset.values()]
    relocate_advanced(data, model, origins, problems, warnings)
    for name, info in model.model_fields.items():  # validated too, so their paths resolve
        if isinstance(info.default, BaseModel) and name not in data:
            data[name] = {}
    context = {CONFIG_DIR: base} if base is not None else None
    settings: SettingsT | None = None
    usable: SettingsT | None = None
    try:
        settings = usable = model.model_validate(data, context=context)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(str(part) for part in error["loc"])
            if not _under(key_loc(origins.file_key(".".join(loc))), unset):  # the unset variable says why
                problems.append(origins.problem(".".join(loc), _problem(error, model)))
        usable = _repaired(data, model, context, exc)
    if problems:
        settings = None
    return Parsed(settings, usable, origins, sort_problems(problems, model), warnings)


REPAIR_ROUNDS = 4


def _repaired(
    data: dict[str, Any], model: type[SettingsT], context: dict[str, Any] | None, exc: ValidationError
) -> SettingsT | None:
    """``data`` validated with each invalid value removed (its default applies), so the semantic
    checks can run on the rest; ``None`` when that is not possible (a required value is wrong)."""
    data = copy.deepcopy(data)
    for _ in range(REPAIR_ROUNDS):
        locs = [tuple(error["loc"]) for error in exc.errors()]
        if any(error["type"] == "missing" for error in exc.errors()):
            return None
        removed = [_remove(data, loc) for loc in sorted(locs, key=_descending_indexes)]
        if not any(removed):
            return None
        try:
            return model.model_validate(data, context=context)
        except ValidationError as again:
            exc = again
    return None


def _descending_indexes(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Later list items first, so removing one does not move the next one to remove."""
    return tuple(-part if isinstance(part, int) else 0 for part in loc)


def _remove(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the value at ``loc`` (or at the deepest part of it that exists); whether one was."""
    node: Any = data
    parent: Any = None
    key: Any = None
    for part in loc:
        if isinstance(node, dict) and part in node:
            parent, key, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parent, key, node = node, part, node[part]
        else:
            break
    if parent is None:
        return False
    del parent[key]
    return True


def _under(loc: Loc, roots: Mapping[Loc, object]) -> bool:
    return any(loc[: len(root)] == root for root in roots)


def _problem(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known key" + did_you_mean(model, tuple(str(part) for part in error["loc"]))
    if kind in ("literal_error", "enum"):
        return f"{error['input']!r} is not one of {error.get('ctx', {}).get('expected', '?')}"
    message = str(error["msg"])
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


# --- the models' keys -------------------------------------------------------------------


def node_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's value is (or holds, in a list or a dict) and whether it is held so."""
    if get_origin(annotation) in (list, dict, tuple):
        args = get_args(annotation)
        return (node_model(args[-1])[0] if args else None), True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in get_args(annotation):  # X | None, Annotated[X, ...]
        found = node_model(arg)
        if found[0] is not None:
            return found
    return None, False


def holder(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model whose field ``loc[-1]`` would be (list indexes and dict keys skipped)."""
    current: type[BaseModel] | None = model
    index = 0
    while current is not None and index < len(loc) - 1:
        info = current.model_fields.get(loc[index])
        if info is None:
            return None
        current, held = node_model(info.annotation)
        index += 2 if held else 1
    return current if index == len(loc) - 1 else None


def advanced_keys(model: type[BaseModel]) -> dict[str, list[str]]:
    """``{section: [key, …]}``: the fields written under ``advanced:`` in the file."""
    found: dict[str, list[str]] = {}
    for name, info in model.model_fields.items():
        section, held = node_model(info.annotation)
        if section is not None and not held:
            keys = [key for key, sub in section.model_fields.items() if is_advanced(sub)]
            if keys:
                found[name] = keys
    return found


def model_fields_of(model: type[BaseModel], section: str) -> list[str]:
    """The keys of ``section`` (a field of ``model`` that is a section), else none."""
    info = model.model_fields.get(section)
    found = node_model(info.annotation)[0] if info is not None else None
    return list(found.model_fields) if found is not None else []


def did_you_mean(model: type[BaseModel], loc: Loc) -> str:
    """``; did you mean llm.model?`` for a key close to a known one at the same place, else ``""``."""
    if loc[:1] == (ADVANCED,):
        known = advanced_keys(model)
        if len(loc) == 2:
            candidates = {section: f"{ADVANCED}.{section}" for section in known}
        else:
            candidates = {key: f"{ADVANCED}.{loc[1]}.{key}" for key in known.get(loc[1], [])}
    else:
        parent = holder(model, loc)
        if parent is None:
            return ""
        prefix = ".".join(loc[:-1])
        candidates = {}
        for key, info in parent.model_fields.items():
            where = f"{prefix}.{key}" if prefix else key
            advanced_place = len(loc) == 2 and is_advanced(info)
            candidates[key] = f"{ADVANCED}.{where}" if advanced_place else where
        if len(loc) == 1 and advanced_keys(model):
            candidates[ADVANCED] = ADVANCED
    close = difflib.get_close_matches(loc[-1], list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {candidates[close[0]]}?" if close else ""


def key_order(model: type[BaseModel], key: str) -> tuple[tuple[int, str], ...]:
    """Where ``key`` sits in the file's (and the reference's) order: the models' field order,
    list items by index; unknown keys after the known ones of their place."""
    order: list[tuple[int, str]] = []
    current: type[BaseModel] | None = model
    held = False
    for part in key_loc(key):
        if held:
            order.append((int(part), "") if part.isdigit() else (0, part))
            held = False
            continue
        fields = list(current.model_fields) if current is not None else []
        if current is not None and part in fields:
            order.append((fields.index(part), ""))
            current, held = node_model(current.model_fields[part].annotation)
        else:
            order.append((len(fields) + 1000, part))
            current = None
    return tuple(order)


def sort_problems(problems: Iterable[ConfigError], model: type[BaseModel]) -> list[ConfigError]:
    """Every problem once, in the file's key order (a file-level problem first)."""
    unique = {str(problem): problem for problem in problems}
    return sorted(unique.values(), key=lambda problem: key_order(model, problem.key))


def relocate_advanced(
    data: dict[str, Any],
    model: type[BaseModel],
    origins: Origins,
    problems: list[ConfigError],
    warnings: list[ConfigWarning],
) -> None:
    """Move ``advanced.<section>.<key>`` to ``<section>.<key>``, where the models keep it (the
    code reads ``settings.telegram.poll_timeout`` wherever the file writes it); a key still at
    its old place works, with a one-line deprecation warning naming both places."""
    known = advanced_keys(model)
    block = data.pop(ADVANCED, None)
    given = block if isinstance(block, dict) else {}
    for section, keys in known.items():
        node = data.get(section)
        if not isinstance(node, dict):
            continue
        written = given.get(section)
        newer: dict[str, Any] = written if isinstance(written, dict) else {}
        for key in keys:
            if key in node:
                place = f"{ADVANCED}.{section}.{key}"
                said = (
                    f"ignored: {place} is set" if key in newer else f"moved to {place}; it still works here"
                )
                warnings.append(ConfigWarning(f"{section}.{key}", said))
    if block is None:
        return
    if not isinstance(block, dict):
        problems.append(
            ConfigError(ADVANCED, "is a mapping of sections (advanced: {telegram: {poll_timeout: 30}})")
        )
        return
    for section, values in block.items():
        where = (ADVANCED, str(section))
        if section not in known:
            problems.append(ConfigError(".".join(where), "is not a known key" + did_you_mean(model, where)))
            continue
        if values is None:
            continue
        if not isinstance(values, dict):
            problems.append(ConfigError(".".join(where), f"is a mapping of {section}'s advanced keys"))
            continue
        target = _advanced_target(data, model, section)
        for key, value in values.items():
            spelled = (*where, str(key))
            if key in model_fields_of(model, section) and key not in known[section]:
                problems.append(
                    ConfigError(".".join(spelled), f"is not a tuning knob: write it as {section}.{key}")
                )
            elif key not in known[section]:
                problems.append(
                    ConfigError(".".join(spelled), "is not a known key" + did_you_mean(model, spelled))
                )
            elif target is not None:
                target[key] = value
                origins.written[(section, str(key))] = spelled


def _advanced_target(data: dict[str, Any], model: type[BaseModel], section: str) -> dict[str, Any] | None:
    """The section's values to put advanced keys in; ``None`` for an optional section left out
    (its advanced keys wait until it is there) or one that is not a mapping (pydantic says so)."""
    node = data.get(section)
    if node is None:
        if model.model_fields[section].default is None:
            return None
        node = data[section] = {}
    return node if isinstance(node, dict) else None


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


def _lenient_api_keys(
    data: dict[str, Any], unset: dict[Loc, ConfigError], warnings: list[ConfigWarning]
) -> None:
    """An API key whose variable is unset is sent empty, with a warning, to any endpoint but
    OpenAI's own (a local server needs none); for api.openai.com it stays an error."""
    for loc in list(unset):
        base_url = _api_key_endpoint(data, loc)
        if base_url is None or is_openai(base_url):
            continue
        node = data
        for part in loc[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[loc[-1]] = ""
        warnings.append(
            ConfigWarning(".".join(loc), f"{unset.pop(loc).problem}: no API key is sent to {base_url}")
        )


def _api_key_endpoint(data: dict[str, Any], loc: Loc) -> str | None:
    """The endpoint the API key at ``loc`` is sent to; ``None`` when ``loc`` is no API key."""
    found = data.get("llm")
    llm: dict[str, Any] = found if isinstance(found, dict) else {}
    default = str(llm.get("base_url") or f"https://{OPENAI_HOST}/v1")
    if loc == ("llm", "api_key"):
        return default
    if loc == ("transcription", "api_key"):
        section = data.get("transcription")
        return str((section.get("base_url") if isinstance(section, dict) else None) or default)
    if len(loc) == 4 and loc[:2] == ("llm", "models") and loc[3] == "api_key" and loc[2].isdigit():
        models = llm.get("models")
        entry = models[int(loc[2])] if isinstance(models, list) and int(loc[2]) < len(models) else None
        return str((entry.get("base_url") if isinstance(entry, dict) else None) or default)
    return None


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
    """The effective config as plain data, in the file's shape (tuning knobs under ``advanced``),
    with every secret replaced by ``***``."""
    dumped: dict[str, Any] = settings.model_dump(mode="json")  # SecretStr dumps as '**********'
    moved: dict[str, Any] = {}
    for section, keys in advanced_keys(type(settings)).items():
        values = dumped.get(section)
        if isinstance(values, dict):
            moved[section] = {key: values.pop(key) for key in keys if key in values}
    if moved:
        dumped[ADVANCED] = moved
    return dumped
