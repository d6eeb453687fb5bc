"""The one root model of ``config.yml``, and the adapters' sections in it.

The split, and why:

* :class:`runtime.infra.config.Settings` holds the core's sections (``llm``,
  ``storage``, ``agent``, …); the runtime knows no chat platform and never
  imports ``agentgram.bot`` (an import contract).
* :class:`AgentgramSettings`, here, is *the* root: the core's sections plus the
  adapters' — ``telegram`` (optional: ``agentgram chat`` runs without it),
  ``web`` and ``terminal``. The file is validated against it once, by
  :func:`bot.config_check.inspect` (the one entry point ``check-config``,
  ``run``, ``chat`` and ``doctor`` call); tuning knobs nobody should need are
  written under ``advanced:`` (:func:`runtime.infra.config.relocate_advanced`).
* :class:`BotSettings` is not a second model of the file: it is the root with
  ``telegram`` known to be there, which is what the Telegram adapter is typed
  against. :func:`with_telegram` narrows a validated root to it without
  validating anything again.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from agentgram.bot.terminal.settings import TerminalSettings
from agentgram.bot.web.settings import WebSettings
from agentgram.runtime.capabilities.agents import AGENT_NAME, MAIN
from agentgram.runtime.infra.config import (
    ADVANCED,
    ConfigInvalid,
    HttpUrl,
    Parsed,
    Section,
    Settings,
    advanced,
    advanced_keys,
    parse_mapping,
    read_config,
    sort_problems,
)
from agentgram.runtime.infra.errors import ConfigError

PUBLIC_API_HOST = "api.telegram.org"
PUBLIC_DOWNLOAD_MB = 20
"""The most a bot may download through the public Bot API; a local Bot API server allows more."""
TOKEN_SHAPE = re.compile(r"\d+:[A-Za-z0-9_-]+")
"""What @BotFather's tokens look like: the bot's id, a colon, the secret (``config_check`` holds a
token to it: aiogram refuses another shape with a traceback when its ``Bot`` is made)."""
PUBLIC_UPLOAD_MB = 50
LOCAL_UPLOAD_MB = 2000
"""The most a bot may send through the public Bot API, and through a local Bot API server."""


USERNAME = re.compile(r"@?[A-Za-z][A-Za-z0-9_]{4,31}")
"""A Telegram @username (5-32 characters), with or without its ``@``."""


def _not_a_username(value: object) -> object:
    """A @username where a user id belongs gets the hint; a number written as a string
    (``"123"``) is read as that number, as pydantic reads any quoted integer."""
    if isinstance(value, str) and (value.strip().startswith("@") or USERNAME.fullmatch(value.strip())):
        shown = repr(value).replace("{", "{{").replace("}", "}}")
        raise PydanticCustomError(
            "user_id_username",
            f"{shown} is a username; a user id is a number, not a @username: the bot tells a stranger their id",
        )
    return value


UserId = Annotated[int, BeforeValidator(_not_a_username)]
"""A Telegram user id: a number (``"123"`` in quotes is read as 123); a @username is refused with
the way to find the id."""


WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{32,256}")
"""A webhook's ``secret_token``: Telegram allows 1-256 of these characters; agentgram asks for 32 at
least, so it cannot be guessed."""
DEFAULT_WEBHOOK_LISTEN = "127.0.0.1:8443"


def _host_and_port(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{value!r} is not host:port (e.g. {DEFAULT_WEBHOOK_LISTEN})")
    return value


class WebhookSettings(Section):
    """``telegram.webhook``: where Telegram POSTs updates when ``telegram.mode`` is ``webhook``."""

    listen: str = DEFAULT_WEBHOOK_LISTEN
    """``host:port`` the webhook listener binds (its own server, not the web view's); a TLS-terminating
    proxy in front forwards ``public_url`` to it."""
    path: str = "/telegram/webhook"
    """The URL path updates are POSTed to (``/healthz`` beside it reports the webhook's health)."""
    public_url: HttpUrl | None = None
    """Where Telegram reaches the listener, without the path (``https://bot.example.org``); HTTPS unless
    ``telegram.api_base_url`` is a local Bot API server. Required in webhook mode."""
    secret_token: SecretStr | None = None
    """32-256 characters of ``A-Za-z0-9_-`` (e.g. ``openssl rand -hex 32``); Telegram sends it with every
    update and anything without it is refused. Required in webhook mode."""
    max_connections: int = Field(default=40, ge=1, le=100)
    """At most this many updates Telegram POSTs at once (one chat's updates always come one by one)."""
    relay_url: HttpUrl | None = None
    """In a cluster: where the other instances reach this listener, path included (they relay
    Telegram's POSTs of the chats this instance runs there). ``None``: ``http://`` the ``listen``
    host (this machine's name when it listens on every address), its port and ``path``."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return _host_and_port(value)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or value == "/healthz" or "?" in value or "#" in value:
            raise ValueError(f"{value!r} is not a URL path starting with / (e.g. /telegram/webhook)")
        return value

    @field_validator("secret_token")
    @classmethod
    def _secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not WEBHOOK_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("use 32-256 characters of A-Za-z0-9_- (e.g. `openssl rand -hex 32`)")
        return value

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].removeprefix("[").removesuffix("]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    def relay_address(self) -> str:
        """``relay_url``, or the address derived from ``listen`` and ``path``."""
        if self.relay_url is not None:
            return str(self.relay_url)
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}{self.path}"

    @property
    def url(self) -> str:
        """The URL ``setWebhook`` is given: ``public_url`` and ``path``."""
        assert self.public_url is not None, "webhook mode is refused without public_url (config_check)"
        return self.public_url.rstrip("/") + self.path


GENERAL_TOPIC = 1
"""The ``message_thread_id`` of a forum's General topic: its key under ``telegram.groups.topics``
(its messages often carry no thread id at all)."""


class TopicSettings(Section):
    """One forum topic's own agent and instructions (``telegram.groups.topics``); at least one of
    the two is set. The topic is a session of its own, so what it says holds there alone."""

    agent: str | None = None
    """The agent (``agents/<name>/AGENT.md``) that answers in this topic, as the root agent: its
    prompt, its tools and its model. ``null``: ``main``."""
    prompt: str | None = None
    """Instructions for this topic's conversation, added to the system prompt after the line
    that names the group."""

    @field_validator("agent")
    @classmethod
    def _agent_name(cls, value: str | None) -> str | None:
        if value is not None and not AGENT_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not an agent's name (lowercase letters, digits, '-' and '_': "
                "the folder agents/<name>/)"
            )
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt_text(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("is empty: write the instructions, or leave the key out")
        return value.strip() if value is not None else None

    @model_validator(mode="after")
    def _something_set(self) -> TopicSettings:
        if self.agent is None and self.prompt is None:
            raise ValueError("set agent, prompt or both (a topic without either needs no entry)")
        return self


class GroupSettings(Section):
    """Group chats and supergroups the agent works in (:mod:`bot.telegram.core.groups`; the
    README's "Groups and topics")."""

    allowed_chat_ids: list[int] = Field(default_factory=list)
    """The groups' and supergroups' chat ids (negative numbers); none: groups stay off. The log
    names a group's id when someone writes there."""
    require_mention: bool = True
    """``true``: the bot answers a group message only when it is addressed (an @mention, a reply
    to the bot, a command); ``false``: every message of an allowed user."""
    approver: Literal["any_allowed", "requester"] = "any_allowed"
    """Who may decide a group's approval prompts: any of ``telegram.allowed_user_ids``, or only
    the allowed user whose message the prompt replies to (the one that caused it)."""
    topics: dict[int, dict[int, TopicSettings]] = Field(default_factory=dict)
    """Forum topics with an agent or instructions of their own: chat id (one of
    ``allowed_chat_ids``) → topic id (the ``message_thread_id``; ``1``: the General topic) →
    ``agent`` and/or ``prompt``. Each topic is a conversation of its own; a topic not named here
    is answered by ``main`` without extra instructions."""

    @field_validator("topics")
    @classmethod
    def _topics_of_allowed_chats(
        cls, value: dict[int, dict[int, TopicSettings]], info: ValidationInfo
    ) -> dict[int, dict[int, TopicSettings]]:
        """Each mistake is reported at the key it is under (``topics.<chat>`` or
        ``topics.<chat>.<topic>``): a :class:`ValidationError` raised here keeps its errors'
        places, below this field's."""
        allowed = info.data.get("allowed_chat_ids")  # absent when it is invalid itself
        errors: list[InitErrorDetails] = []
        for chat, topics in value.items():
            if allowed is not None and chat not in allowed:
                errors.append(
                    _topic_error((chat,), f"{chat} is not in telegram.groups.allowed_chat_ids", topics)
                )
            errors += [
                _topic_error(
                    (chat, thread),
                    f"a topic id is {GENERAL_TOPIC} or more ({GENERAL_TOPIC}: the General topic)",
                    topic,
                )
                for thread, topic in topics.items()
                if thread < GENERAL_TOPIC
            ]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return value

    def topic(self, chat_id: int, thread_id: int | None) -> TopicSettings | None:
        """What ``topics`` says of a chat's topic; ``thread_id`` ``None`` or 0 (a message of no
        topic) is the General topic's."""
        return self.topics.get(chat_id, {}).get(thread_id or GENERAL_TOPIC)


def _topic_error(loc: tuple[int, ...], problem: str, value: object) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("topic", problem), loc=loc, input=value)


def unknown_topic_agents(settings: AgentgramSettings, known: Collection[str]) -> str | None:
    """The first agent ``telegram.groups.topics`` names that is not one of ``known`` (the
    catalog's names), as one config line naming its key; ``None`` when every one is known. The
    agents are read at start, after the config is validated, so the model cannot check this."""
    if settings.telegram is None:
        return None
    for chat, topics in settings.telegram.groups.topics.items():
        for thread, topic in topics.items():
            if topic.agent is not None and topic.agent not in known:
                names = ", ".join(sorted(known, key=lambda name: (name != MAIN, name)))
                key = f"telegram.groups.topics.{chat}.{thread}.agent"
                return f"{key}: no agent named {topic.agent!r} (agents: {names})"
    return None


class TelegramSettings(Section):
    token: SecretStr
    """The bot token from @BotFather."""
    library: Literal["ptb", "aiogram"] = "ptb"
    """The driver that speaks the Bot API (``bot/telegram/drivers``): python-telegram-bot or aiogram 3."""
    api_base_url: HttpUrl = f"https://{PUBLIC_API_HOST}"
    """The Bot API root; calls go to ``{root}/bot{token}/{method}`` (a local Bot API server works too)."""
    allowed_user_ids: list[UserId] = Field(min_length=1)
    """Telegram user ids (numbers, not @usernames) allowed to talk to the agent and press its buttons."""
    mode: Literal["polling", "webhook"] = "polling"
    """How updates arrive: ``polling`` (getUpdates) or ``webhook`` (Telegram POSTs them to
    ``telegram.webhook``; see the operations guide, "Webhook mode")."""
    webhook: WebhookSettings = WebhookSettings()
    """The webhook listener, read in webhook mode."""
    stream_edit_interval: float = advanced(1.0, ge=0.05)
    """Where drafts are off or refused: seconds between edits of a streaming reply."""
    stream_first_delay: float = advanced(0.5, ge=0, le=10)
    """...and such a reply's first text waits this long; a reply complete by then is one message."""
    drafts: bool = True
    """Private chats stream replies as drafts (sendMessageDraft): first words at once, one message at the end."""
    draft_interval: float = advanced(0.3, ge=0.05, le=10)
    """Seconds between drafts of a streaming reply, per chat."""
    poll_timeout: int = advanced(30, ge=0, le=50)
    """Long-polling timeout for getUpdates, seconds."""
    max_retries: int = advanced(3, ge=0, le=10)
    """Not read any more: each chat's send queue retries every call itself, honouring a 429's
    retry_after (the drivers only pace). Kept so that older files still load."""
    messages_per_second: float = advanced(30.0, gt=0)
    """The overall send/edit budget (Telegram's guidance); typing actions are not counted."""
    pairing: bool = False
    """``true``: a stranger gets a code and the first allowed user gets Approve/Deny buttons."""
    groups: GroupSettings = GroupSettings()
    """Group chats (off unless ``allowed_chat_ids`` names some)."""
    job_status_interval: float = advanced(5.0, ge=2)
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
    def public_api(self) -> bool:
        """Telegram's own Bot API, not a local Bot API server at ``api_base_url``."""
        return _is_public(self.api_base_url)

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
    telegram: TelegramSettings | None = None
    """The Telegram bot; ``agentgram run`` needs it, ``agentgram chat`` runs without it."""


class AgentgramSettings(Settings, _TelegramSection):
    """The whole ``config.yml``: the one root model (module docstring). ``telegram`` comes in
    through a base listed after :class:`Settings`, so pydantic sees it first: it keeps its place
    at the top of ``check-config``'s output and of the error list, as in the file."""

    web: WebSettings = WebSettings()
    """The web view (:mod:`bot.web`); its token rules are checked with the section."""
    terminal: TerminalSettings = TerminalSettings()
    """The terminal chat (``agentgram chat``, :mod:`bot.terminal`)."""


class BotSettings(AgentgramSettings):
    """The root with ``telegram`` there: what the Telegram adapter is typed against."""

    telegram: TelegramSettings


def with_telegram(settings: AgentgramSettings) -> BotSettings:
    """``settings`` as :class:`BotSettings` (its ``telegram`` must be set): the same values,
    nothing validated again."""
    if isinstance(settings, BotSettings):
        return settings
    assert settings.telegram is not None, "with_telegram needs a telegram section"
    narrowed = BotSettings.model_construct(
        _fields_set=settings.model_fields_set,
        **{name: getattr(settings, name) for name in type(settings).model_fields},
    )
    narrowed._config_file = settings.config_file
    return narrowed


def current_layout(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with every tuning knob written at its old place moved under ``advanced:`` (what
    ``config.example.yml`` shows); the values are the same."""
    data = {**raw}
    block: dict[str, Any] = {**(data.get(ADVANCED) or {})}
    for section, keys in advanced_keys(AgentgramSettings).items():
        values = data.get(section)
        if not isinstance(values, dict) or not any(key in values for key in keys):
            continue
        kept = {key: value for key, value in values.items() if key not in keys}
        moved = {key: values[key] for key in keys if key in values}
        data[section] = kept
        block[section] = {**(block.get(section) or {}), **moved}
    if block:
        data[ADVANCED] = block
    return data


class TelegramPresence:
    """A :data:`~runtime.infra.config.Prepare` step that notes whether the data hold a
    ``telegram`` section (``run`` needs one; the root model does not)."""

    def __init__(self) -> None:
        self.present: bool | None = None  # None: the file was not read that far

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        self.present = data.get("telegram") is not None
        return data

    def problems(self) -> list[ConfigError]:
        return [ConfigError("telegram", "is required")] if self.present is False else []


def load_bot_config(path: Path, environ: Mapping[str, str] | None = None) -> BotSettings:
    """``config.yml`` as the Telegram adapter reads it (see :func:`runtime.config.load_config`);
    no semantic checks (``bot.config_check.check_config`` adds them)."""
    presence = TelegramPresence()
    return _bot(read_config(path, environ, model=AgentgramSettings, prepare=presence), presence)


def bot_settings_from_mapping(raw: dict[str, Any], env: Mapping[str, str]) -> BotSettings:
    presence = TelegramPresence()
    return _bot(parse_mapping(raw, env, model=AgentgramSettings, prepare=presence), presence)


def _bot(parsed: Parsed[AgentgramSettings], presence: TelegramPresence) -> BotSettings:
    problems = [*parsed.problems, *presence.problems()]
    if problems or parsed.settings is None:
        raise ConfigInvalid(sort_problems(problems, AgentgramSettings), parsed.warnings)
    return with_telegram(parsed.settings)
