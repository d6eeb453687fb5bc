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

This is the driver-neutral part of the adapter: both drivers reach it through :mod:`.incoming`.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.incoming import Message, User, entity_text


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


__all__ = ["addressed", "sender_name", "with_sender"]
