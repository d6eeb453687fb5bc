"""The agent's todo list in the chat: ONE message, edited in place whenever the list changes.

Which message shows a chat's list is kept in the runtime's key-value store
(``telegram.todos.<chat id>`` → the session and the message id, JSON), as
status lines are (:mod:`bot.telegram.records`), so a process after a restart
edits the same message. A list of a new session (after ``/new``) gets a new
message; one whose message Telegram will not edit any more (deleted, too old)
is sent anew and remembered. ``/todos`` sends the list again at the bottom of
the chat, and that message is the one edited from then on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.sender import PERSISTENT, Edit, edit_html, send_html
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.app import TodoItem, TodoStatus
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.events import TodosChanged
from agentgram.runtime.infra.i18n import Translator

TODOS = "telegram.todos."
_MARK = {TodoStatus.PENDING: "⬜", TodoStatus.IN_PROGRESS: "🔄", TodoStatus.DONE: "✅"}


class KeyValues(Protocol):
    async def get_value(self, key: str) -> str | None: ...
    async def set_value(self, key: str, value: str) -> None: ...


@dataclass(slots=True, frozen=True)
class TodosShown:
    session_id: int
    message_id: int


def todos_html(t: Translator, lang: str | None, items: tuple[TodoItem, ...]) -> str:
    if not items:
        return t.t(lang, "todos-empty")
    lines = []
    for item in items:
        text = escape(item.text)
        lines.append(f"{_MARK[item.status]} {f'<s>{text}</s>' if item.status is TodoStatus.DONE else text}")
    return "\n".join([t.t(lang, "todos-title"), *lines])


async def shown(store: KeyValues, chat_id: int) -> TodosShown | None:
    raw = await store.get_value(f"{TODOS}{chat_id}")
    try:
        value = json.loads(raw) if raw is not None else None
        session_id, message_id = value["session"], value["message"]  # type: ignore[index]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(session_id, int) or not isinstance(message_id, int):
        return None
    return TodosShown(session_id, message_id)


async def remember(store: KeyValues, chat_id: int, session_id: int, message_id: int) -> None:
    await store.set_value(f"{TODOS}{chat_id}", json.dumps({"session": session_id, "message": message_id}))


async def send(bot: BotApi, store: KeyValues, chat_id: int, session_id: int, html: str) -> None:
    """Send the list as a new message and make it the one later changes edit."""
    sent = await send_html(bot, chat_id, html, silent=True, retry=PERSISTENT)
    if sent is not None:
        await remember(store, chat_id, session_id, sent.message_id)


async def show(bot: BotApi, runtime: Door, t: Translator, lang: str | None, event: TodosChanged) -> None:
    """The changed list: its message edited, or a new one when there is none to edit."""
    chat_id = event.to.chat_id
    assert chat_id is not None
    html = todos_html(t, lang, event.items)
    known = await shown(runtime.values, chat_id)
    if known is not None and known.session_id == event.to.session_id:
        if await edit_html(bot, chat_id, known.message_id, html) != Edit.GONE:
            return  # shown, or not now: the next change edits it again
    await send(bot, runtime.values, chat_id, event.to.session_id, html)


__all__ = ["TODOS", "TodosShown", "remember", "send", "show", "shown", "todos_html"]
