"""The Telegram adapter's config checks, and the one validation the CLI runs.

:func:`check_config` is what both ``agentgram check-config`` and ``agentgram
run`` call before anything is built: the runtime's checks
(:data:`runtime.config_check.RUNTIME_CHECKS`, and the hook tools ``tools.wrappers`` names,
which only the runtime's facade knows: every tool a runtime registers) plus the rules only Telegram
has — a bot token at all (PTB refuses an empty one with a traceback when the
application is built) and a real user id instead of ``config.example.yml``'s
placeholder.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from agentgram.bot.settings import TOKEN_SHAPE, BotSettings
from agentgram.runtime.app import unknown_hook_tools
from agentgram.runtime.config_check import RUNTIME_CHECKS, Check, CheckProblem, validate_config
from agentgram.runtime.infra.config import Settings

EXAMPLE_USER_ID = 123456789
"""The user id ``config.example.yml`` ships with; nobody can talk to a bot that allows only it."""


def check_token(settings: BotSettings) -> Iterator[CheckProblem]:
    token = settings.telegram.token.get_secret_value().strip()
    if not token:
        yield CheckProblem("telegram.token", "is empty; put the bot token from @BotFather")
    elif not TOKEN_SHAPE.fullmatch(token):
        yield CheckProblem("telegram.token", "is not a bot token: @BotFather's look like 123456789:AAE…")


def check_allowed_users(settings: BotSettings) -> Iterator[CheckProblem]:
    if EXAMPLE_USER_ID in settings.telegram.allowed_user_ids:
        yield CheckProblem(
            "telegram.allowed_user_ids",
            f"{EXAMPLE_USER_ID} is the example's placeholder; put your own Telegram user id (see README)",
        )


def check_tool_hooks(settings: Settings) -> Iterator[CheckProblem]:
    for problem in unknown_hook_tools(settings):
        yield CheckProblem(problem.key, problem.problem)


TELEGRAM_CHECKS: tuple[Check[BotSettings], ...] = (check_token, check_allowed_users)


def check_config(path: Path, environ: Mapping[str, str] | None = None) -> BotSettings:
    """Parse (as :class:`~bot.settings.BotSettings`) and check everything; raise
    :class:`~runtime.config.ConfigInvalid` listing every problem."""
    return validate_config(
        path, (*RUNTIME_CHECKS, check_tool_hooks, *TELEGRAM_CHECKS), environ, model=BotSettings
    )
