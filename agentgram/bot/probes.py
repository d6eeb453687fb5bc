"""Is the outside world there? The calls ``agentgram init`` and ``agentgram doctor`` make.

Each probe makes the call the bot itself will make — with python-telegram-bot
for Telegram whatever ``telegram.library`` says (the Bot API's answer is the
same to either driver), the ``openai`` SDK for the LLM endpoint
(the completion goes through the runtime's own :class:`OpenAIClient`, so a
request shape the bot would send and the endpoint refuses fails here first)
— and raises :class:`ProbeFailed` with what went wrong and how to fix it, in
words for a person at a terminal. Secrets never appear in them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import openai
from openai import AsyncOpenAI

from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.errors import FailureKind, LLMError
from agentgram.runtime.infra.llm.openai_client import OpenAIClient
from agentgram.runtime.infra.llm.types import StreamEvent, ToolSpec, UserMessage
from agentgram.runtime.infra.log import redact, register_secret

if TYPE_CHECKING:  # python-telegram-bot is imported by a Telegram probe (`run` on aiogram loads none)
    from telegram import Bot, User
    from telegram.error import TelegramError

PROBE_TIMEOUT = 15.0
"""Seconds for one listing of models; a completion gets up to :data:`COMPLETION_TIMEOUT`."""
COMPLETION_TIMEOUT = 60.0
FIX_TOKEN = "copy the token again from @BotFather (/mybots → your bot → API Token) into telegram.token"
FIX_BASE_URL = "check llm.base_url: the API root, usually ending in /v1, and that the server runs"
PING_TOOL = ToolSpec(
    "agentgram_ping", "Does nothing; there is no need to call it.", {"type": "object", "properties": {}}
)
PING_PROMPT = "This is a connection test. Reply with the single word: ok"


class ProbeFailed(Exception):
    """What failed, and the fix (``""`` when the words already say it)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


# --- Telegram ------------------------------------------------------------------------


@asynccontextmanager
async def telegram(token: str, api_base_url: str) -> AsyncIterator[tuple[Bot, BotIdentity]]:
    """An initialized bot (``getMe`` answered) and who it is; :class:`ProbeFailed` if Telegram says no."""
    from telegram import Bot
    from telegram.error import TelegramError

    if not token.strip():
        raise ProbeFailed("the bot token is empty", FIX_TOKEN)
    register_secret(token)
    root = api_base_url.rstrip("/")
    bot = Bot(token, base_url=f"{root}/bot", base_file_url=f"{root}/file/bot")
    try:
        await bot.initialize()  # calls getMe
    except TelegramError as error:
        await bot.shutdown()
        raise _refused(error, root) from None
    try:
        yield bot, BotIdentity(bot.bot.id, bot.bot.username or bot.bot.first_name)  # bots have one
    finally:
        await bot.shutdown()


def _refused(error: TelegramError, root: str) -> ProbeFailed:
    from telegram.error import InvalidToken

    if isinstance(error, InvalidToken):
        return ProbeFailed("Telegram rejected the bot token (401 Unauthorized)", FIX_TOKEN)
    return ProbeFailed(
        f"cannot reach Telegram at {root}: {redact(str(error))}",
        "check the network (and telegram.api_base_url, if you set it)",
    )


# --- the LLM endpoint -------------------------------------------------------------------


async def listed_models(base_url: str, api_key: str) -> list[str]:
    """What ``GET {base_url}/models`` lists (possibly nothing: some servers list no models)."""
    register_secret(api_key)
    client = AsyncOpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=PROBE_TIMEOUT, max_retries=0
    )
    try:
        page = await client.models.list()
    except openai.AuthenticationError as error:
        raise refused_key(base_url, error.status_code) from None
    except openai.APIStatusError as error:
        raise ProbeFailed(f"{base_url}/models answered HTTP {error.status_code}", FIX_BASE_URL) from None
    except openai.APIConnectionError:  # timeouts included
        raise ProbeFailed(f"cannot connect to {base_url}", FIX_BASE_URL) from None
    finally:
        await client.close()
    return [model.id for model in page.data]


def refused_key(base_url: str, status: int | None) -> ProbeFailed:
    """The endpoint refused the key: said as the chat says it (``llm-auth-failed``), the fix in
    the words themselves."""
    return ProbeFailed(f"{base_url} refused the API key (HTTP {status or 401}) — check llm.api_key", "")


def unlisted(model: str, listed: list[str]) -> ProbeFailed | None:
    """Why ``model`` will not work with an endpoint that lists ``listed``, if it will not."""
    if not listed or model in listed:
        return None
    shown = ", ".join(listed[:8]) + (", …" if len(listed) > 8 else "")
    return ProbeFailed(
        f"{model} is not among the {len(listed)} models the endpoint lists ({shown})",
        "set llm.model to one of them",
    )


async def completion_with_tool(settings: LLMSettings) -> str:
    """Stream one short answer with a tool defined, as a turn does; the model that answered."""
    once = settings.model_copy(
        update={
            "fallback_models": [],
            "max_retries": 0,
            "request_timeout": min(settings.request_timeout, COMPLETION_TIMEOUT),
        }
    )
    client = OpenAIClient(once)

    async def ignore(_event: StreamEvent) -> None:
        return None

    try:
        answered = await client.stream_round([UserMessage(PING_PROMPT)], [PING_TOOL], ignore)
    except LLMError as error:
        if error.kind is FailureKind.AUTH_FAILED:
            raise refused_key(settings.base_url, error.status) from None
        raise ProbeFailed(
            f"{settings.model}: {error}",
            "check llm.model, and that the endpoint streams chat completions with tools (function calling)",
        ) from None
    finally:
        await client.aclose()
    return answered.model or settings.model


async def first_private_sender(bot: Bot, wait: float) -> User | None:
    """The sender of the first private message the bot gets within ``wait`` seconds, if any.

    That message (and those before it) is confirmed to Telegram, so the bot,
    once it runs, does not answer it. Raises :class:`TelegramError` when
    updates cannot be read (a webhook is set, another program polls).
    """
    from telegram.constants import ChatType

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    offset: int | None = None
    while (remaining := deadline - loop.time()) > 0:
        updates = await bot.get_updates(
            offset=offset, timeout=max(1, min(int(remaining), 30)), allowed_updates=["message"]
        )
        for update in updates:
            offset = update.update_id + 1
            user, chat = update.effective_user, update.effective_chat
            if update.message and user and not user.is_bot and chat and chat.type == ChatType.PRIVATE:
                await bot.get_updates(offset=offset, timeout=0)
                return user
    return None
