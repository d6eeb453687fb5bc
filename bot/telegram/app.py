"""The Telegram adapter: python-telegram-bot wired to the runtime.

Start-up order: build the PTB application (pointed at ``telegram.api_base_url``,
with ``AIORateLimiter`` for 429s), check the token (a 401 ends the process
with exit code 2), start the runtime (migrations, recovery), register the
command menu once, then run the durable ingest loop until told to stop.
Each start step that talks to Telegram (``getMe``, ``deleteWebhook``,
``setMyCommands``) waits out an outage — a service started at boot before the
network, Telegram down — retrying with backoff (:data:`START_RETRY`) for as
long as it takes; only a refusal a retry cannot change (401, 400) ends it.
Shutdown reverses it: polling stops, then :meth:`Runtime.close` runs the one
ordered shutdown — the scheduler stops firing, the hub stops its consumers
without cancelling turns (a restart resumes them), queued output is delivered
briefly, the database closes — and PTB stops last.

Everything is built by :func:`compose`, the one place the adapter is wired.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from functools import partial

from telegram import Update
from telegram.ext import Application, ApplicationBuilder, ContextTypes

from agentgram.bot.settings import BotSettings
from agentgram.bot.telegram import handlers
from agentgram.bot.telegram.context import KEY, BotContext
from agentgram.bot.telegram.delivery import Delivery
from agentgram.bot.telegram.files import MB, TelegramFiles
from agentgram.bot.telegram.format_rules import TELEGRAM_FORMAT_RULES
from agentgram.bot.telegram.handlers.commands import menu
from agentgram.bot.telegram.ingest import Ingest
from agentgram.bot.telegram.metrics import MeteredRequest, watch
from agentgram.bot.telegram.ratelimit import MessageRateLimiter
from agentgram.bot.telegram.router import JoinedRouter
from agentgram.bot.telegram.sender import Retry, with_retry
from agentgram.runtime.app import Runtime
from agentgram.runtime.i18n import Translator
from agentgram.runtime.llm.types import LLMClient
from agentgram.runtime.log import get_logger, register_secret

log = get_logger("telegram")

START_RETRY = Retry(attempts=None, first_delay=1.0, max_delay=50.0)
"""Start-up calls retry until Telegram answers: first after ~1 s, then doubling up to 50 s
(with the ±20 % jitter never more than 60 s)."""


def build_application(settings: BotSettings) -> Application:  # type: ignore[type-arg]
    tg = settings.telegram
    return (
        ApplicationBuilder()
        .token(tg.token.get_secret_value())
        .base_url(tg.bot_base_url)
        .base_file_url(tg.file_base_url)
        .rate_limiter(MessageRateLimiter(overall_max_rate=tg.messages_per_second, max_retries=tg.max_retries))
        .request(MeteredRequest(connection_pool_size=256))  # PTB's own sizes; counts every call
        .get_updates_request(MeteredRequest(connection_pool_size=1))
        .updater(None)
        .build()
    )


async def _log_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    log.error("handler failed on an update: %r", context.error, exc_info=context.error)


@dataclass(slots=True, eq=False)
class TelegramBot:
    """One bot: the parts :func:`compose` joined, started and stopped in order (module docstring).

    It owns the one task the adapter runs beside PTB, the ingest loop; delivery owns its
    per-chat tasks, the runtime the rest.
    """

    settings: BotSettings
    application: Application  # type: ignore[type-arg]
    runtime: Runtime
    translator: Translator
    delivery: Delivery
    routers: JoinedRouter
    ingest: Ingest
    start_retry: Retry = START_RETRY
    _ingest_task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self) -> None:
        """Start everything, waiting out Telegram outages (see the module docstring).

        Raises :class:`telegram.error.InvalidToken` when Telegram rejects the token, another
        :class:`telegram.error.TelegramError` when it refuses a start step for good (a 400).
        Cancelling it (a signal during the retries) leaves what :meth:`stop` cleans up.
        """
        bot = self.application.bot
        await with_retry(self.application.initialize, self.start_retry, "start-up: getMe")
        await with_retry(bot.delete_webhook, self.start_retry, "start-up: deleteWebhook")
        await self.runtime.start()
        await self.application.start()
        for lang, commands in menu(self.translator).items():  # one menu per language
            register = partial(bot.set_my_commands, commands, language_code=lang)
            await with_retry(register, self.start_retry, "start-up: setMyCommands")
        self._ingest_task = asyncio.create_task(self.ingest.run(), name="ingest")
        log.info("agentgram is running as @%s", self.application.bot.username)

    async def wait(self) -> None:
        assert self._ingest_task is not None
        await self._ingest_task

    async def stop(self) -> None:
        """Ingest first, so nothing new arrives; then the runtime's one ordered shutdown (which
        closes delivery once the hub has stopped, see :func:`compose`); then PTB."""
        self.ingest.stop()
        if self._ingest_task is not None:
            self._ingest_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._ingest_task
        await self.runtime.close()
        with contextlib.suppress(Exception):
            if self.application.running:
                await self.application.stop()
            await self.application.shutdown()
            await self.application.bot.shutdown()  # a start that never got past getMe left it open


def compose(
    settings: BotSettings, *, llm: LLMClient | None = None, start_retry: Retry = START_RETRY
) -> TelegramBot:
    """The whole adapter, wired in one place: PTB, the runtime, its file source, delivery,
    handlers, ingest.

    Delivery hears the runtime's events and is closed by it, after the hub stopped and
    before the database closes, so queued output is still delivered and recorded.
    """
    register_secret(settings.telegram.token.get_secret_value())  # before anything can log it
    application = build_application(settings)
    runtime = Runtime(
        settings,
        format_rules=TELEGRAM_FORMAT_RULES,
        llm=llm,
        home_chat_id=settings.telegram.allowed_user_ids[0],  # tics' home chat: the first allowed user
    )
    translator = Translator(default=settings.locale.default)
    tg = settings.telegram
    delivery = Delivery(
        application.bot,
        runtime,
        translator,
        tg.stream_edit_interval,
        first_delay=tg.stream_first_delay,
        drafts=tg.drafts,
        draft_interval=tg.draft_interval,
        job_interval=tg.job_status_interval,
        upload_limit_mb=tg.max_upload_mb,
    )
    runtime.set_file_source(TelegramFiles(application.bot), max_upload_bytes=tg.max_upload_mb * MB)
    runtime.subscribe(delivery)
    runtime.on_close(delivery.close)
    context = BotContext(runtime, settings, translator, delivery)
    application.bot_data[KEY] = context
    joined = handlers.join()
    handlers.install(application, joined)
    application.add_error_handler(_log_error)
    ingest = Ingest(application, runtime, tg.poll_timeout)
    watch(delivery, ingest)  # the outbox depth and polling lag gauges
    return TelegramBot(settings, application, runtime, translator, delivery, joined, ingest, start_retry)


__all__ = ["START_RETRY", "TelegramBot", "Update", "compose"]
