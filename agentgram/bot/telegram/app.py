"""The Telegram adapter: the chosen driver (``telegram.library``) wired to the runtime.

Start-up order: build the driver (:mod:`.drivers`, pointed at
``telegram.api_base_url``, with its rate limiter for 429s), check the token
(``getMe``; a 401 ends the process with exit code 2), start the runtime
(migrations, recovery), register the command menu once, then run the durable
ingest loop until told to stop. Each start step that talks to Telegram
(``getMe``, ``deleteWebhook``, ``setMyCommands``) waits out an outage — a
service started at boot before the network, Telegram down — retrying with
backoff (:data:`START_RETRY`) for as long as it takes; only a refusal a retry
cannot change (401, 400) ends it. Shutdown reverses it: polling stops, then
:meth:`Runtime.close` runs the one ordered shutdown — the scheduler stops
firing, the hub stops its consumers without cancelling turns (a restart
resumes them), queued output is delivered briefly, the database closes — and
the driver's client closes last.

In webhook mode (``telegram.mode: webhook``, :mod:`.core.webhook`) the listener's socket is bound
first (a ``telegram.webhook.listen`` in use is a config error before anything starts),
``deleteWebhook`` and ``getUpdates`` are never called; once the runtime has started the listener
serves and ``setWebhook`` is called (retried like the other start steps). In a cluster the
instances share the chats, and each relays an update of a chat another instance runs to that
instance (:mod:`.core.webhook_relay`). Stopping drains the listener first
(new POSTs get 503) and never deletes the webhook.

Everything is built by :func:`compose`, the one place the adapter is wired.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from agentgram.bot.settings import BotSettings
from agentgram.bot.telegram import handlers
from agentgram.bot.telegram.core.chat_queue import Retry, with_retry
from agentgram.bot.telegram.core.context import BotContext
from agentgram.bot.telegram.core.files import MB, TelegramFiles
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.ingest import Ingest
from agentgram.bot.telegram.core.metrics import watch
from agentgram.bot.telegram.core.port import ALLOWED_UPDATES
from agentgram.bot.telegram.core.router import Dispatcher, JoinedRouter
from agentgram.bot.telegram.core.shared_budget import shared_budget
from agentgram.bot.telegram.drivers import Driver, make_driver
from agentgram.bot.telegram.handlers.commands import menu
from agentgram.bot.telegram.views.delivery import Delivery
from agentgram.bot.telegram.views.format_rules import TELEGRAM_FORMAT_RULES
from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.log import get_logger, register_secret

if TYPE_CHECKING:  # webhook mode only: its listener is a web server (issue 31: polling imports none)
    from agentgram.bot.telegram.core.webhook_listener import WebhookListener

log = get_logger("telegram")

START_RETRY = Retry(attempts=None, first_delay=1.0, max_delay=50.0)
"""Start-up calls retry until Telegram answers: first after ~1 s, then doubling up to 50 s
(with the ±20 % jitter never more than 60 s)."""


@dataclass(slots=True, eq=False)
class TelegramBot:
    """One bot: the parts :func:`compose` joined, started and stopped in order (module docstring).

    It owns the one task the adapter runs, the ingest loop; delivery owns its
    per-chat tasks, the runtime the rest.
    """

    settings: BotSettings
    driver: Driver
    runtime: Runtime
    translator: Translator
    delivery: Delivery
    routers: JoinedRouter
    dispatcher: Dispatcher
    shared: BotContext
    ingest: Ingest
    start_retry: Retry = START_RETRY
    webhook: WebhookListener | None = None
    """The webhook listener in webhook mode; ``None`` when polling."""
    _ingest_task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self) -> None:
        """Start everything, waiting out Telegram outages (see the module docstring).

        Raises :class:`~.port.InvalidToken` when Telegram rejects the token, another
        :class:`~.port.TelegramError` when it refuses a start step for good (a 400).
        Cancelling it (a signal during the retries) leaves what :meth:`stop` cleans up.
        """
        api = self.driver.api
        if self.webhook is not None:
            self.webhook.bind()
            self._share_chats(self.webhook)
        await with_retry(api.get_me, self.start_retry, "start-up: getMe")
        if self.webhook is None:
            await with_retry(api.delete_webhook, self.start_retry, "start-up: deleteWebhook")
        await self.runtime.start()
        for lang, commands in menu(self.translator).items():  # one menu per language
            register = partial(api.set_my_commands, commands, language_code=lang)
            await with_retry(register, self.start_retry, "start-up: setMyCommands")
            if self.settings.telegram.groups.allowed_chat_ids:  # the groups' menu too
                in_groups = partial(api.set_my_commands, commands, language_code=lang, groups=True)
                await with_retry(in_groups, self.start_retry, "start-up: setMyCommands (groups)")
        if self.webhook is not None:
            await self._start_webhook(self.webhook)
        else:
            self._ingest_task = asyncio.create_task(self.ingest.run(), name="ingest")
        log.info(
            "agentgram is running as @%s (%s, %s)",
            api.username,
            self.settings.telegram.library,
            self.settings.telegram.mode,
        )

    def _share_chats(self, listener: WebhookListener) -> None:
        """In a cluster: register where this listener is reached, share the chats with the other
        instances, and relay each update to the instance that runs its chat (:mod:`.core.webhook_relay`)."""
        from agentgram.bot.telegram.core.webhook_relay import Relay

        cluster = self.runtime.cluster
        if cluster is None:
            return
        hook = self.settings.telegram.webhook
        assert hook.secret_token is not None, "webhook mode is refused without a secret (config_check)"
        cluster.relay_url = hook.relay_address()
        cluster.spread()
        listener.relay_to_owners(Relay(cluster, hook.secret_token.get_secret_value()))

    async def _start_webhook(self, listener: WebhookListener) -> None:
        """Serve, then tell Telegram where (updates it holds come once ``setWebhook`` answered)."""
        await listener.start()
        hook = self.settings.telegram.webhook
        assert hook.secret_token is not None, "webhook mode is refused without a secret (config_check)"
        register = partial(
            self.driver.api.set_webhook,
            hook.url,
            hook.secret_token.get_secret_value(),
            hook.max_connections,
            ALLOWED_UPDATES,
        )
        await with_retry(register, self.start_retry, "start-up: setWebhook")
        self._ingest_task = asyncio.create_task(listener.wait(), name="webhook")

    def last_ingest_ok(self) -> float | None:
        """Monotonic time updates were last known to flow, for the web view's health check: the
        last returned poll; in webhook mode now while the listener serves (a quiet webhook is not
        a broken one — its own ``/healthz`` reports Telegram's last delivery error)."""
        if self.webhook is None:
            return self.ingest.last_poll_ok
        serving = self._ingest_task is not None and not self.webhook.ingest.draining
        return time.monotonic() if serving else None

    async def wait(self) -> None:
        assert self._ingest_task is not None
        await self._ingest_task

    async def stop(self) -> None:
        """Ingest first, so nothing new arrives; then the runtime's one ordered shutdown (which
        closes delivery once the hub has stopped, see :func:`compose`); then the driver's client."""
        if self.webhook is not None:
            await self.webhook.stop()  # drains: new POSTs get 503; never deleteWebhook
        self.ingest.stop()
        if self._ingest_task is not None:
            self._ingest_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._ingest_task
        await self.runtime.close()
        await self.driver.api.close()


def compose(
    settings: BotSettings, *, llm: LLMClient | None = None, start_retry: Retry = START_RETRY
) -> TelegramBot:
    """The whole adapter, wired in one place: the driver, the runtime, its file source, delivery,
    handlers, ingest.

    Delivery hears the runtime's events and is closed by it, after the hub stopped and
    before the database closes, so queued output is still delivered and recorded.
    """
    register_secret(settings.telegram.token.get_secret_value())  # before anything can log it
    runtime = Runtime(
        settings,
        format_rules=TELEGRAM_FORMAT_RULES,
        llm=llm,
        home_chat_id=settings.telegram.allowed_user_ids[0],  # tics' home chat: the first allowed user
    )
    # in a cluster the driver paces by the budget every instance shares (core.shared_budget)
    driver = make_driver(
        settings.telegram, shared_budget(runtime.send_budget, settings.telegram.messages_per_second)
    )
    translator = Translator(default=settings.locale.default)
    tg = settings.telegram
    delivery = Delivery(
        driver.api,
        runtime,
        translator,
        tg.stream_edit_interval,
        first_delay=tg.stream_first_delay,
        drafts=tg.drafts,
        draft_interval=tg.draft_interval,
        job_interval=tg.job_status_interval,
        upload_limit_mb=tg.max_upload_mb,
    )
    runtime.set_file_source(TelegramFiles(driver.api), max_upload_bytes=tg.max_upload_mb * MB)
    runtime.subscribe(delivery)
    runtime.on_close(delivery.close)
    shared = BotContext(runtime, settings, translator, delivery)
    joined = handlers.join()
    dispatcher = handlers.dispatcher(joined)
    ingest = Ingest(
        driver.api, driver.parse, partial(dispatcher.process, shared=shared), runtime, tg.poll_timeout
    )
    watch(delivery, ingest)  # the outbox depth and polling lag gauges
    return TelegramBot(
        settings,
        driver,
        runtime,
        translator,
        delivery,
        joined,
        dispatcher,
        shared,
        ingest,
        start_retry,
        _webhook(settings, driver, runtime, partial(dispatcher.process, shared=shared, reraise=True)),
    )


def _webhook(
    settings: BotSettings, driver: Driver, runtime: Runtime, process: Callable[[Update], Awaitable[None]]
) -> WebhookListener | None:
    """The webhook listener in webhook mode (the same parser and handlers as polling), else ``None``."""
    tg = settings.telegram
    if tg.mode != "webhook":
        return None
    from agentgram.bot.telegram.core.webhook import WebhookIngest
    from agentgram.bot.telegram.core.webhook_listener import WebhookListener

    assert tg.webhook.secret_token is not None, "webhook mode is refused without a secret (config_check)"
    secret = tg.webhook.secret_token.get_secret_value()
    register_secret(secret)
    return WebhookListener(WebhookIngest(driver.parse, process, runtime, secret), driver.api, tg.webhook)


__all__ = ["START_RETRY", "TelegramBot", "compose"]
