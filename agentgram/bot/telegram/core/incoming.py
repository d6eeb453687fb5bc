"""Updates as the handlers read them, whichever library parsed them.

A driver parses each raw update with its own library (so Telegram's newest
fields are that library's problem, and one it cannot read is a dead letter,
see :mod:`.ingest`), then :func:`from_library` copies what agentgram reads
into these frozen types. Both python-telegram-bot and aiogram name their
attributes as the Bot API does (``from_user``, ``media_group_id``,
``reply_to_message``…), so one copy serves both.

The few shortcuts handlers use (:meth:`Message.set_reaction`,
:meth:`CallbackQuery.answer`…) go through the update's :class:`~.port.BotApi`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentgram.bot.telegram.core.port import BotApi, Keyboard, KeyButton
from agentgram.bot.telegram.core.topics import in_topic

PRIVATE = "private"
"""``Chat.type`` of a one-to-one chat with the bot."""
GROUPS = frozenset({"group", "supergroup"})
"""``Chat.type`` of the chats several people share with the bot."""


@dataclass(slots=True, frozen=True)
class User:
    id: int
    is_bot: bool = False
    first_name: str = ""
    last_name: str | None = None
    username: str | None = None
    language_code: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}" if self.last_name else self.first_name


@dataclass(slots=True, frozen=True)
class Chat:
    id: int
    type: str = PRIVATE
    title: str | None = None
    """A group's or channel's name (``None`` for a private chat)."""
    is_forum: bool = False
    """A supergroup with topics: each topic is a thread of its own."""

    @property
    def is_group(self) -> bool:
        """A group or supergroup (not a private chat, not a channel)."""
        return self.type in GROUPS


@dataclass(slots=True, frozen=True)
class FileRef:
    """A photo size, voice note, audio, video, video note, animation, document or sticker."""

    file_id: str
    file_unique_id: str = ""
    file_size: int | None = None
    mime_type: str | None = None
    file_name: str | None = None
    width: int | None = None
    height: int | None = None
    duration: int | None = None
    emoji: str | None = None  # a sticker's
    transcript: str | None = None  # a voice note's, when Telegram Premium made one


@dataclass(slots=True, frozen=True)
class Entity:
    type: str
    offset: int
    """In UTF-16 code units, as Telegram counts (:func:`entity_text`)."""
    length: int
    user_id: int | None = None
    """A ``text_mention``'s user."""


def entity_text(text: str, entity: Entity) -> str:
    """The part of ``text`` an entity covers (its offset and length count UTF-16 code units)."""
    encoded = text.encode("utf-16-le")
    return encoded[entity.offset * 2 : (entity.offset + entity.length) * 2].decode(
        "utf-16-le", errors="replace"
    )


@dataclass(slots=True, frozen=True)
class Message:
    message_id: int
    chat: Chat
    api: BotApi = field(repr=False, compare=False)
    date: datetime | None = None
    from_user: User | None = None
    text: str | None = None
    caption: str | None = None
    entities: tuple[Entity, ...] = ()
    photo: tuple[FileRef, ...] = ()
    voice: FileRef | None = None
    audio: FileRef | None = None
    video: FileRef | None = None
    video_note: FileRef | None = None
    animation: FileRef | None = None
    document: FileRef | None = None
    sticker: FileRef | None = None
    media_group_id: str | None = None
    thread_id: int | None = None
    """``message_thread_id``: the forum topic (or reply thread) the message belongs to."""
    is_topic_message: bool = False
    reply_to_message: Message | None = None
    reply_markup: Keyboard | None = None  # the inline keyboard under it (a prompt's buttons)
    topic_name: str | None = None
    """The name a forum topic's creation service message (``forum_topic_created``) gives it."""

    @property
    def chat_id(self) -> int:
        return self.chat.id

    @property
    def topic(self) -> int:
        """The forum topic the message is in, as its session's ``thread_id``: 0 outside one (a
        private chat, a plain group, a reply thread of a supergroup, a forum's General topic)."""
        if self.chat.is_forum and self.is_topic_message and self.thread_id is not None:
            return self.thread_id
        return 0

    @property
    def topic_title(self) -> str | None:
        """The name of the topic the message is in, when the message shows it: every message in a
        topic that replies to nothing else carries the topic's creation as its reply."""
        replied = self.reply_to_message
        if self.topic and replied is not None and replied.message_id == self.thread_id:
            return replied.topic_name
        return self.topic_name if self.topic and self.message_id == self.thread_id else None

    @property
    def command(self) -> str | None:
        """``start`` for ``/start`` or ``/start@this_bot …``; ``None`` unless the text begins
        with a bot command."""
        first = self.entities[0] if self.entities else None
        if self.text is None or first is None or first.type != "bot_command" or first.offset != 0:
            return None
        name, _, to = self.text[1 : first.length].partition("@")
        if to and self.api.username is not None and to.lower() != self.api.username.lower():
            return None  # addressed to another bot in the group
        return name.lower()

    @property
    def args(self) -> list[str]:
        """The words after a command (``/cron kill 3`` → ``["kill", "3"]``)."""
        if self.command is None or self.text is None:
            return []
        return self.text[self.entities[0].length :].split()

    async def set_reaction(self, emoji: str | None) -> None:
        await self.api.set_message_reaction(self.chat.id, self.message_id, emoji)


@dataclass(slots=True, frozen=True)
class CallbackQuery:
    id: str
    from_user: User
    api: BotApi = field(repr=False, compare=False)
    data: str | None = None
    message: Message | None = None  # None when Telegram no longer has it
    chat: Chat | None = None
    """The chat of the button's message, also when the message itself is no longer accessible
    (Telegram still names its chat and id), as PTB's ``Update.effective_chat`` reads it."""

    async def answer(self, text: str | None = None, show_alert: bool = False) -> None:
        await self.api.answer_callback_query(self.id, text=text, show_alert=show_alert)

    async def edit_message_reply_markup(self, reply_markup: Keyboard | None = None) -> None:
        if self.message is not None:
            await self.api.edit_message_reply_markup(
                self.message.chat.id, self.message.message_id, reply_markup
            )

    async def delete_message(self) -> None:
        if self.message is not None:
            await self.api.delete_message(self.message.chat.id, self.message.message_id)


@dataclass(slots=True, frozen=True)
class Update:
    update_id: int
    api: BotApi = field(repr=False, compare=False)
    message: Message | None = None
    edited_message: Message | None = None
    edited_channel_post: Message | None = None
    channel_post: Message | None = None
    callback_query: CallbackQuery | None = None
    other_user: User | None = None  # the sender of a kind agentgram does not handle (my_chat_member…)
    other_chat: Chat | None = None
    dedup_window: str | None = None
    """Set by webhook ingest (:mod:`.webhook`): what, beside ``update_id``, keys the update's mail
    (:func:`~.context.envelope_id`); ``None`` for polled updates."""

    @property
    def effective_message(self) -> Message | None:
        return (
            self.message
            or self.edited_message
            or self.channel_post
            or self.edited_channel_post
            or (self.callback_query.message if self.callback_query is not None else None)
        )

    @property
    def effective_chat(self) -> Chat | None:
        message = self.effective_message
        if message is not None:
            return message.chat
        if self.callback_query is not None and self.callback_query.chat is not None:
            return self.callback_query.chat  # a press on a message Telegram no longer shows
        return self.other_chat

    @property
    def chat_id(self) -> int:
        """The id of :attr:`effective_chat`, for a handler that only runs where there is one (a
        command, a button press)."""
        chat = self.effective_chat
        assert chat is not None
        return chat.id

    @property
    def effective_user(self) -> User | None:
        if self.callback_query is not None:
            return self.callback_query.from_user
        message = self.effective_message
        return message.from_user if message is not None and message.from_user else self.other_user

    def get_bot(self) -> BotApi:
        """The Bot API as this update's place sees it: in a forum topic, every message sent
        through it lands in that topic (:mod:`.topics`)."""
        message = self.effective_message
        return self.api if message is None else in_topic(self.api, message.chat_id, message.topic)


# --- from a library's objects ------------------------------------------------------

_MESSAGES = ("message", "edited_message", "channel_post", "edited_channel_post")
_OTHERS = ("my_chat_member", "chat_member", "chat_join_request", "message_reaction", "inline_query")


def from_library(update: Any, api: BotApi) -> Update:
    """The neutral copy of a python-telegram-bot or aiogram ``Update``."""
    messages = {name: _message(getattr(update, name, None), api) for name in _MESSAGES}
    query = getattr(update, "callback_query", None)
    other = next((o for name in _OTHERS if (o := getattr(update, name, None)) is not None), None)
    return Update(
        update_id=update.update_id,
        api=api,
        callback_query=_query(query, api) if query is not None else None,
        other_user=_user(getattr(other, "from_user", None) or getattr(other, "user", None)),
        other_chat=_chat(getattr(other, "chat", None)),
        message=messages["message"],
        edited_message=messages["edited_message"],
        channel_post=messages["channel_post"],
        edited_channel_post=messages["edited_channel_post"],
    )


def _message(message: Any, api: BotApi, *, depth: int = 0) -> Message | None:
    chat = _chat(getattr(message, "chat", None))
    if chat is None or getattr(message, "message_id", None) is None:
        return None  # a message no chat holds is no message to answer
    photo = tuple(f for size in getattr(message, "photo", None) or () if (f := _file(size)) is not None)
    reply = getattr(message, "reply_to_message", None)
    return Message(
        message_id=message.message_id,
        chat=chat,
        api=api,
        date=_date(getattr(message, "date", None)),
        from_user=_user(getattr(message, "from_user", None)),
        text=getattr(message, "text", None),
        caption=getattr(message, "caption", None),
        entities=tuple(_entity(e) for e in getattr(message, "entities", None) or ()),
        photo=photo,
        voice=_file(getattr(message, "voice", None)),
        audio=_file(getattr(message, "audio", None)),
        video=_file(getattr(message, "video", None)),
        video_note=_file(getattr(message, "video_note", None)),
        animation=_file(getattr(message, "animation", None)),
        document=_file(getattr(message, "document", None)),
        sticker=_file(getattr(message, "sticker", None)),
        media_group_id=getattr(message, "media_group_id", None),
        thread_id=getattr(message, "message_thread_id", None),
        is_topic_message=bool(getattr(message, "is_topic_message", False)),
        reply_to_message=_message(reply, api, depth=depth + 1) if reply is not None and depth < 1 else None,
        reply_markup=_keyboard(getattr(message, "reply_markup", None)),
        topic_name=getattr(getattr(message, "forum_topic_created", None), "name", None),
    )


def _keyboard(markup: Any) -> Keyboard | None:
    rows = getattr(markup, "inline_keyboard", None)
    if not rows:
        return None
    return Keyboard(
        [
            [KeyButton(key.text, key.callback_data) for key in row if isinstance(key.callback_data, str)]
            for row in rows
        ]
    )


def _name(value: Any) -> str:
    """An enum member's value (aiogram's ``str, Enum`` types print as ``Type.NAME``), or the str."""
    return str(getattr(value, "value", value))


def _date(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _accessible(message: Any) -> bool:
    """Not an ``InaccessibleMessage`` (date 0: Telegram no longer shows it to the bot)."""
    date = getattr(message, "date", None)
    return isinstance(date, datetime) and date.timestamp() > 0


def _query(query: Any, api: BotApi) -> CallbackQuery:
    user = _user(query.from_user)
    assert user is not None
    message = getattr(query, "message", None)
    return CallbackQuery(
        id=str(query.id),
        from_user=user,
        api=api,
        data=query.data,
        message=_message(message, api) if message is not None and _accessible(message) else None,
        chat=_chat(getattr(message, "chat", None)),
    )


def _user(user: Any) -> User | None:
    if user is None:
        return None
    return User(
        id=user.id,
        is_bot=bool(getattr(user, "is_bot", False)),
        first_name=getattr(user, "first_name", "") or "",
        last_name=getattr(user, "last_name", None),
        username=getattr(user, "username", None),
        language_code=getattr(user, "language_code", None),
    )


def _entity(entity: Any) -> Entity:
    user = getattr(entity, "user", None)
    return Entity(_name(entity.type), entity.offset, entity.length, getattr(user, "id", None))


def _chat(chat: Any) -> Chat | None:
    if chat is None:
        return None
    return Chat(
        id=chat.id,
        type=_name(getattr(chat, "type", PRIVATE)),
        title=getattr(chat, "title", None),
        is_forum=bool(getattr(chat, "is_forum", False)),
    )


def _file(value: Any) -> FileRef | None:
    if value is None or getattr(value, "file_id", None) is None:
        return None
    return FileRef(
        file_id=value.file_id,
        file_unique_id=getattr(value, "file_unique_id", "") or "",
        file_size=getattr(value, "file_size", None),
        mime_type=getattr(value, "mime_type", None),
        file_name=getattr(value, "file_name", None),
        width=getattr(value, "width", None),
        height=getattr(value, "height", None),
        duration=_seconds(getattr(value, "duration", None)),
        emoji=getattr(value, "emoji", None),
        transcript=_extra(value, "transcript"),
    )


def _extra(value: Any, key: str) -> Any:
    """A field the library does not know yet: python-telegram-bot keeps it in ``api_kwargs``,
    aiogram as an extra attribute."""
    extra = getattr(value, "api_kwargs", None)
    if isinstance(extra, Mapping) and key in extra:
        return extra[key]
    return getattr(value, key, None)


def _seconds(value: Any) -> int | None:
    """PTB gives durations as a ``timedelta`` (or an int, by its setting); aiogram as an int."""
    if value is None:
        return None
    total = getattr(value, "total_seconds", None)
    return int(total()) if callable(total) else int(value)
