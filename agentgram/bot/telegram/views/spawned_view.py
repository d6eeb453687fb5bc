"""How a session another session spawned (issue 29) shows in the chat it reports to.

A spawned session works in the background beside the chat's own; the chat shows only what it
says to the user (:func:`~bot.shown.reaches_chat` is the rule): each turn's final answer as one
message under its name (``🤖 <b>researcher</b> (session 7): …``), its approval prompts and
questions under a line naming who asks, and its notices (under its name) and files. Never its
streamed text, tool lines or typing: those would mix with the chat's own turn.

Each answer it sends is remembered in the runtime's key-value store (:func:`message_key` → the
session's id), so that the user's reply to it is mail to that session, after a restart too
(:mod:`..handlers.messages`); ``/sessions``' 📖 sends its last answer again the same way.
"""

from __future__ import annotations

from dataclasses import replace

from agentgram.bot.telegram.core.port import BotApi, Sent
from agentgram.bot.telegram.core.sender import PERSISTENT, send_html
from agentgram.bot.telegram.views.prompts import Prompt
from agentgram.bot.telegram.views.render import escape, markdown_to_html
from agentgram.runtime.door.protocols import KeyValueStore
from agentgram.runtime.door.values import SpawnedSession
from agentgram.runtime.infra.i18n import Translator

_KEY = "spawned-msg"


def message_key(chat_id: int, message_id: int) -> str:
    """The key-value store's key of a bot message a spawned session sent (its value: the id)."""
    return f"{_KEY}:{chat_id}:{message_id}"


async def remember(values: KeyValueStore, chat_id: int, message_id: int, session_id: int) -> None:
    await values.set_value(message_key(chat_id, message_id), str(session_id))


async def sender_of(values: KeyValueStore, chat_id: int, message_id: int) -> int | None:
    """The spawned session that sent bot message ``message_id``, if one did."""
    value = await values.get_value(message_key(chat_id, message_id))
    return int(value) if value is not None and value.isdigit() else None


def label(t: Translator, lang: str | None, name: str, session_id: int) -> str:
    """``🤖 <b>researcher</b> (session 7)``: what each of its messages starts with (``name``: its
    own, else its agent's; unescaped). Ids go in as text (Fluent would group a number's digits)."""
    return t.t(lang, "spawned-label", name=escape(name), id=str(session_id))


def signed(t: Translator, lang: str | None, session: SpawnedSession, html: str) -> str:
    """``html`` said by ``session``: its label, then the text."""
    return f"{label(t, lang, session.name, session.ref.id)}: {html}"


def asks_line(t: Translator, lang: str | None, session: SpawnedSession) -> str:
    """``🤖 <b>researcher</b> (session 7) asks:``, above its approval prompts and questions."""
    return t.t(lang, "spawned-asks", name=escape(session.name), id=str(session.ref.id))


def asked_by(prompt: Prompt, line: str) -> Prompt:
    """An approval prompt under ``line`` (:func:`asks_line`), which its decided form keeps."""
    return replace(prompt, html=f"{line}\n{prompt.html}", body=f"{line}\n{prompt.body}")


async def send_answer(
    bot: BotApi,
    values: KeyValueStore,
    t: Translator,
    lang: str | None,
    session: SpawnedSession,
    chat_id: int,
    text: str | None,
) -> Sent | None:
    """``text`` (the session's markdown; ``None``: it has not answered yet) as one message under
    its name, sent until delivered (or refused for good: ``None``), remembered as the session's so a
    reply reaches it. A long answer is split; its last part is the one remembered."""
    if text is None:
        html = t.t(lang, "spawned-no-answer", name=escape(session.name), id=str(session.ref.id))
    else:
        html = signed(t, lang, session, markdown_to_html(text))
    sent = await send_html(bot, chat_id, html, retry=PERSISTENT)
    if sent is not None:
        await remember(values, chat_id, sent.message_id, session.ref.id)
    return sent


__all__ = [
    "asked_by",
    "asks_line",
    "label",
    "message_key",
    "remember",
    "send_answer",
    "sender_of",
    "signed",
]
