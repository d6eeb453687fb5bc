"""Group chats: which ones the bot works in, and which of their messages are addressed to it.

A group or supergroup is the agent's only when its id is in ``telegram.groups.allowed_chat_ids``;
elsewhere the bot says once that it is not enabled there (the log names the chat id to add) and
stays silent. In an allowed group only ``telegram.allowed_user_ids`` may talk to the agent or
press its buttons, as in private chats; the session belongs to the group, and each message
reaches the model with its sender in front (:func:`with_sender`).

**Addressed** (:func:`addressed`): a message that

* mentions the bot: a ``mention`` entity naming its @username, or a ``text_mention`` of its user;
* replies to one of the bot's messages (not the service message that opened a forum topic, which
  Telegram gives as the "reply" of every message in a topic that replies to nothing);
* is a command for the bot: ``/stop@this_bot``, or a bare ``/stop`` — taken as the bot's, as if it
  were the group's only bot (Telegram sends a bot the bare commands of its groups only while it
  is the group's only bot or an admin, or privacy mode is off).

With ``telegram.groups.require_mention`` (the default) every other message causes nothing: no
model call, no bot message, and it is not kept (the agent sees what was said to it, not the
group's chatter — the README's "Groups and topics" says so, and how privacy mode changes what
Telegram delivers at all). Off, every message of an allowed user is the agent's.

**Approval prompts in a group** reply to the group's latest message for the agent
(:class:`Speakers`), and with ``telegram.groups.approver: requester`` only that message's sender
may decide them (the requester is stored beside the prompt, :func:`requester_key`); the same goes
for the agent's clarifying questions, by button or by text. By default any allowed user may.

This is the driver-neutral part of the adapter: both drivers reach it through :mod:`.incoming`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from agentgram.bot.telegram.core.incoming import Message, User, entity_text

TOPIC_NAMES_KEPT = 1024
"""Forum topics whose names :class:`TopicNames` keeps (the oldest go first)."""
SPEAKERS_KEPT = 1024
"""Groups whose last addressed message :class:`Speakers` keeps (the oldest go first)."""
REQUESTER = "group-requester:"
"""Key prefix of who caused a group's approval request (``<user id>:<name>``)."""


def addressed(message: Message, bot_id: int | None, bot_username: str | None) -> bool:
    """Whether a group message is addressed to the bot (module docstring)."""
    if message.command is not None:
        return True  # bare, or @this_bot (a command for another bot has none: Message.command)
    text = message.text if message.text is not None else message.caption
    for entity in message.entities:
        if entity.type == "text_mention" and bot_id is not None and entity.user_id == bot_id:
            return True
        if entity.type == "mention" and bot_username is not None and text is not None:
            if entity_text(text, entity).lstrip("@").lower() == bot_username.lower():
                return True
    return _replies_to_bot(message, bot_id)


def _replies_to_bot(message: Message, bot_id: int | None) -> bool:
    replied = message.reply_to_message
    if replied is None or bot_id is None or replied.from_user is None or replied.from_user.id != bot_id:
        return False
    opens_topic = message.is_topic_message and replied.message_id == message.thread_id
    return not opens_topic


def sender_name(user: User | None) -> str:
    """How the model is told who speaks: the first name, and the @username when there is one."""
    if user is None:
        return "someone"
    name = user.full_name or str(user.id)
    return f"{name} (@{user.username})" if user.username else name


def with_sender(text: str, user: User | None) -> str:
    """A group message as the model reads it: ``[Ann (@ann)]: text``."""
    return f"[{sender_name(user)}]: {text}"


@dataclass(frozen=True, slots=True)
class Spoke:
    """A group's latest message for the agent: what its prompts reply to, and who may decide them."""

    message_id: int
    user_id: int
    name: str


class Speakers:
    """Each group's (or forum topic's) latest message for the agent, in memory (a prompt after a
    restart replies to nothing and may be decided by any allowed user: the requester is not known)."""

    def __init__(self, kept: int = SPEAKERS_KEPT) -> None:
        self._last: OrderedDict[tuple[int, int], Spoke] = OrderedDict()
        self._kept = kept

    def note(self, chat_id: int, message_id: int, user: User | None, thread_id: int = 0) -> None:
        if user is None:
            return
        key = (chat_id, thread_id)
        self._last[key] = Spoke(message_id, user.id, sender_name(user))
        self._last.move_to_end(key)
        while len(self._last) > self._kept:
            self._last.popitem(last=False)

    def last(self, chat_id: int, thread_id: int = 0) -> Spoke | None:
        return self._last.get((chat_id, thread_id))


def requester_key(request_id: str) -> str:
    return f"{REQUESTER}{request_id}"


def question_key(question_id: str) -> str:
    """What :func:`requester_key` is given for a clarifying question's buttons."""
    return f"q:{question_id}"


def session_question_key(session_id: int) -> str:
    """...and for the text answer to a session's pending question."""
    return f"q-session:{session_id}"


def requester_value(spoke: Spoke) -> str:
    return f"{spoke.user_id}:{spoke.name}"


def parse_requester(value: str) -> tuple[int, str] | None:
    user, _, name = value.partition(":")
    return (int(user), name) if user.lstrip("-").isdigit() else None


__all__ = [
    "REQUESTER",
    "Speakers",
    "Spoke",
    "TopicNames",
    "addressed",
    "parse_requester",
    "question_key",
    "requester_key",
    "requester_value",
    "sender_name",
    "session_question_key",
    "with_sender",
]


class TopicNames:
    """The forum topics' names as messages lately showed them: a message in a topic carries the
    topic's creation (with its name) as its reply unless it replies to another message, so a
    name seen once serves the topic's later messages. In memory and bounded; a restart learns
    them again (the session keeps the last title meanwhile)."""

    def __init__(self, capacity: int = TOPIC_NAMES_KEPT) -> None:
        self._capacity = capacity
        self._names: OrderedDict[tuple[int, int], str] = OrderedDict()

    def learn(self, chat_id: int, thread_id: int, shown: str | None) -> str | None:
        """The topic's name: ``shown`` (remembered), else the one last seen, else ``None``."""
        key = (chat_id, thread_id)
        if shown is not None:
            self._names[key] = shown
        name = self._names.get(key)
        if name is not None:
            self._names.move_to_end(key)
            while len(self._names) > self._capacity:
                self._names.popitem(last=False)
        return name
