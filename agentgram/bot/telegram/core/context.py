"""What every Telegram handler needs: the bot's shared parts (:class:`BotContext`), handed to each
handler in its :class:`~bot.telegram.router.HandlerContext`."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from agentgram.bot.settings import BotSettings
from agentgram.bot.telegram.core.access_list import AccessList
from agentgram.bot.telegram.core.groups import TopicNames
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import HandlerContext
from agentgram.bot.telegram.views.delivery import Delivery
from agentgram.runtime.app import About, SessionRef
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.i18n import Translator


@dataclass(slots=True)
class BotContext:
    runtime: Door
    settings: BotSettings
    translator: Translator
    delivery: Delivery
    _access: AccessList | None = field(default=None, init=False, repr=False)
    albums_acked: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=64), init=False)
    topic_names: TopicNames = field(default_factory=TopicNames, init=False)
    """The forum topics' names lately seen (a message that replies to another does not show it)."""
    """The albums (chat, ``media_group_id``) lately acknowledged: an album's later items are not."""

    @property
    def access(self) -> AccessList:
        """Configured plus paired users (made on first use: the gate loads it before asking)."""
        if self._access is None:
            self._access = AccessList(self.settings.telegram.allowed_user_ids, self.runtime.values)
        return self._access

    def allowed(self, user_id: int | None) -> bool:
        return self.access.allowed(user_id)

    def lang(self, update: Update) -> str | None:
        user = update.effective_user
        return user.language_code if user is not None else None

    def text(self, update: Update, key: str, **params: str | int) -> str:
        return self.translator.t(self.lang(update), key, **params)

    async def session(self, update: Update) -> SessionRef:
        """The session of the update's place: its chat's, or in a forum its topic's."""
        chat, user = update.effective_chat, update.effective_user
        assert chat is not None
        return await self.runtime.chat.chat_session(
            chat.id,
            user_id=user.id if user else None,
            language=self.lang(update),
            thread_id=topic_of(update),
            about=self.about(update),
        )

    def about(self, update: Update) -> About | None:
        """What a group's session is told of its place: the group's name (with its topic's, when
        the update shows it: :attr:`.incoming.Message.topic_title`), and the agent and extra
        instructions ``telegram.groups.topics`` gives the topic. ``None`` for a private chat."""
        chat, message = update.effective_chat, update.effective_message
        if chat is None or not chat.is_group:
            return None
        thread = topic_of(update)
        title = chat.title
        if thread:
            named = self.topic_names.learn(chat.id, thread, message.topic_title if message else None)
            title = f"{chat.title} › {named}" if named is not None else None  # None: keep the stored one
        configured = self.settings.telegram.groups.topic(chat.id, thread)
        if configured is None:
            return About(title=title)
        return About(title=title, agent=configured.agent, instructions=configured.prompt)


def topic_of(update: Update) -> int:
    """The forum topic the update belongs to (its session's ``thread_id``; 0: none)."""
    message = update.effective_message
    return message.topic if message is not None else 0


def envelope_id(update: Update) -> str:
    """Mail ids derive from Telegram's sequential ``update_id``: redelivery is a duplicate.

    A webhook's update also carries its window (:func:`.webhook.dedup_window`, the day of its
    message): ``update_id``s restart at random after a week without updates, and a new update must
    not be taken for an old one's redelivery. Polled updates keep the plain id (:mod:`.ingest`).
    """
    if update.dedup_window is None:
        return f"tg:{update.update_id}"
    return f"tg:{update.update_id}:{update.dedup_window}"


def bot_context(context: HandlerContext) -> BotContext:
    return context.shared
