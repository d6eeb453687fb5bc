"""The one validation of ``config.yml``: :func:`inspect`, which ``check-config``, ``run``, ``chat``
and ``doctor`` all call.

Where things live, and why: the runtime defines its root settings and its checks
(:mod:`runtime.infra.config`, :mod:`runtime.config_check`) and knows no adapter;
:mod:`bot.settings` defines the one root model of the file
(:class:`~bot.settings.AgentgramSettings`, the adapters' sections optional);
this module, on the command line's side, puts them together: it validates the
file against that root once, with every check — the runtime's
(:data:`runtime.config_check.RUNTIME_CHECKS`, and the hook tools
``tools.wrappers`` names, which only the runtime's facade knows), plus the
rules only the adapters have: a bot token at all (PTB refuses an empty one with
a traceback when the application is built), a real user id instead of
``config.example.yml``'s placeholder, and for the terminal alone a user id.

Every problem comes in one pass, in the file's key order: unset variables,
placeholders, type errors and the checks (see
:func:`runtime.config_check.inspect_config`), with the warnings beside them
(an API key sent empty, a key at its pre-``advanced:`` place, a database about
to be created while others exist).

``run``, ``check-config`` and ``doctor`` need the ``telegram`` section;
``agentgram chat`` does not: for it a ``telegram`` section without a token
counts as absent (a config may keep its ``allowed_user_ids`` and leave the token
out; its first allowed user becomes ``terminal.user_id``), and so does a token
that only names environment variables none of which is set
(``config.example.yml``'s ``${TELEGRAM_BOT_TOKEN}`` with the variable unset).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from agentgram.bot.settings import (
    TOKEN_SHAPE,
    AgentgramSettings,
    BotSettings,
    TelegramPresence,
    unknown_topic_agents,
    with_telegram,
)
from agentgram.runtime.app import unknown_hook_tools
from agentgram.runtime.config_check import (
    RUNTIME_CHECKS,
    Check,
    CheckProblem,
    Inspection,
    inspect_config,
)
from agentgram.runtime.infra.config import ConfigInvalid, Prepare, Settings, sort_problems
from agentgram.runtime.infra.errors import ConfigError

EXAMPLE_USER_ID = 123456789
"""The user id ``config.example.yml`` ships with; nobody can talk to a bot that allows only it."""


def check_token(settings: AgentgramSettings) -> Iterator[CheckProblem]:
    if settings.telegram is None:
        return
    token = settings.telegram.token.get_secret_value().strip()
    if not token:
        yield CheckProblem("telegram.token", "is empty; put the bot token from @BotFather")
    elif not TOKEN_SHAPE.fullmatch(token):
        yield CheckProblem("telegram.token", "is not a bot token: @BotFather's look like 123456789:AAE…")


def check_allowed_users(settings: AgentgramSettings) -> Iterator[CheckProblem]:
    if settings.telegram is not None and EXAMPLE_USER_ID in settings.telegram.allowed_user_ids:
        yield CheckProblem(
            "telegram.allowed_user_ids",
            f"{EXAMPLE_USER_ID} is the example's placeholder; put your own Telegram user id (see README)",
        )


def check_webhook(settings: AgentgramSettings) -> Iterator[CheckProblem]:
    """Webhook mode needs where Telegram reaches it and the secret it sends; the public Bot API
    delivers only over HTTPS (a local Bot API server also over plain HTTP)."""
    tg = settings.telegram
    if tg is None or tg.mode != "webhook":
        return
    hook = tg.webhook
    if hook.public_url is None:
        yield CheckProblem(
            "telegram.webhook.public_url",
            "is required when telegram.mode is webhook (where Telegram reaches the listener)",
        )
    elif tg.public_api and not hook.public_url.startswith("https://"):
        yield CheckProblem(
            "telegram.webhook.public_url",
            "must be https:// — Telegram delivers webhooks over HTTPS only "
            "(plain HTTP works with a local Bot API server at telegram.api_base_url)",
        )
    if hook.secret_token is None:
        yield CheckProblem(
            "telegram.webhook.secret_token",
            "is required when telegram.mode is webhook (e.g. `openssl rand -hex 32`)",
        )


def check_tool_hooks(settings: Settings) -> Iterator[CheckProblem]:
    for problem in unknown_hook_tools(settings):
        yield CheckProblem(problem.key, problem.problem)


def check_chat_user(settings: AgentgramSettings) -> Iterator[CheckProblem]:
    if settings.telegram is None and settings.terminal.user_id is None:
        yield CheckProblem(
            "terminal.user_id",
            "is required without a telegram.token (any number; your Telegram user id shares its history)",
        )


def check_topic_agents(settings: AgentgramSettings) -> Iterator[CheckProblem]:
    """Each agent ``telegram.groups.topics`` names is defined (``agents/<name>/AGENT.md``, or
    ``main``): read from the agents folder as ``run`` reads it (a folder that does not load is
    ``check_agents``' to report)."""
    from agentgram.runtime.capabilities.agents import AGENTS_DIR, load_agents

    if settings.telegram is None or not settings.telegram.groups.topics:
        return
    folder = settings.agent.agents_dir or settings.agent.workdir / AGENTS_DIR
    try:
        catalog = load_agents(folder.resolve())
    except ConfigError:
        return
    problem = unknown_topic_agents(settings, catalog.names())
    if problem is not None:
        key, _, text = problem.partition(": ")
        yield CheckProblem(key, text)


TELEGRAM_CHECKS: tuple[Check[AgentgramSettings], ...] = (
    check_token,
    check_allowed_users,
    check_webhook,
    check_topic_agents,
)
CHECKS: tuple[Check[Any], ...] = (*RUNTIME_CHECKS, check_tool_hooks, *TELEGRAM_CHECKS)


def inspect(
    path: Path, environ: Mapping[str, str] | None = None, *, need_telegram: bool = True
) -> Inspection[AgentgramSettings]:
    """Read ``path`` against the root model and run every check; never raises. With
    ``need_telegram`` (``run``, ``check-config``, ``doctor``) a missing ``telegram`` section is
    a problem; without (``chat``) the terminal alone needs a user id (module docstring)."""
    env = os.environ if environ is None else environ
    presence = TelegramPresence()
    prepare: Prepare = presence
    checks = CHECKS
    if not need_telegram:
        env = _unset_token_as_empty(path, env)
        prepare = _tokenless_telegram_is_absent
        checks = (*CHECKS, check_chat_user)
    found = inspect_config(path, checks, env, model=AgentgramSettings, prepare=prepare)
    missing = presence.problems() if need_telegram else []
    if not missing:
        return found
    problems = sort_problems([*found.problems, *missing], AgentgramSettings)
    return Inspection(None, problems, found.warnings, found.parsed, found.usable)


def check_config(path: Path, environ: Mapping[str, str] | None = None) -> BotSettings:
    """:func:`inspect` for ``run``; raise :class:`~runtime.config.ConfigInvalid` listing every problem."""
    found = inspect(path, environ)
    if found.settings is None:
        raise ConfigInvalid(found.problems, found.warnings)
    return with_telegram(found.settings)


def check_chat_config(
    path: Path, environ: Mapping[str, str] | None = None
) -> BotSettings | AgentgramSettings:
    """:func:`inspect` for ``agentgram chat``: :class:`BotSettings` when a bot token is
    configured (validated as ``run`` validates it), else the root with ``telegram`` ``None``."""
    found = inspect(path, environ, need_telegram=False)
    if found.settings is None:
        raise ConfigInvalid(found.problems, found.warnings)
    return found.settings if found.settings.telegram is None else with_telegram(found.settings)


def _tokenless_telegram_is_absent(data: dict[str, Any]) -> dict[str, Any]:
    """A token-less ``telegram`` section is dropped; its first allowed user becomes the
    terminal's unless ``terminal.user_id`` names one."""
    telegram = data.get("telegram")
    if not isinstance(telegram, Mapping) or str(telegram.get("token") or "").strip():
        return data
    terminal = dict(data.get("terminal") or {})
    ids = telegram.get("allowed_user_ids")
    if terminal.get("user_id") is None and isinstance(ids, list) and ids:
        terminal["user_id"] = ids[0]
    return {**{key: value for key, value in data.items() if key != "telegram"}, "terminal": terminal}


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
