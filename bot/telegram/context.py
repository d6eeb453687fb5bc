"""What every Telegram handler needs, kept in ``application.bot_data``."""

from __future__ import annotations

from dataclasses import dataclass, field

from telegram import Update
from telegram.ext import ContextTypes

from bot.telegram.delivery import Delivery
from runtime.app import Runtime
from runtime.config import Settings
from runtime.i18n import Translator
from runtime.mailbox import Checkpoint
from runtime.storage.models import ChatSession

KEY = "agentgram"


@dataclass(slots=True)
class BotContext:
    runtime: Runtime
    settings: Settings
    translator: Translator
    delivery: Delivery
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)  # filled by the ingest loop

    def checkpoint(self, update: Update) -> Checkpoint | None:
        """The update's offset, for the one piece of mail that completes handling it."""
        return self.checkpoints.get(update.update_id)

    def allowed(self, user_id: int | None) -> bool:
        return user_id is not None and user_id in self.settings.telegram.allowed_user_ids

    def lang(self, update: Update) -> str | None:
        user = update.effective_user
        return user.language_code if user is not None else None

    def text(self, update: Update, key: str, **params: str | int) -> str:
        return self.translator.t(self.lang(update), key, **params)

    async def session(self, update: Update) -> ChatSession:
        chat, user = update.effective_chat, update.effective_user
        assert chat is not None
        return await self.runtime.chat_session(
            chat.id, user_id=user.id if user else None, language=self.lang(update)
        )


def envelope_id(update: Update) -> str:
    """Mail ids derive from Telegram's sequential ``update_id``: redelivery is a duplicate."""
    return f"tg:{update.update_id}"


def bot_context(context: ContextTypes.DEFAULT_TYPE) -> BotContext:
    ctx = context.application.bot_data[KEY]
    assert isinstance(ctx, BotContext)
    return ctx
