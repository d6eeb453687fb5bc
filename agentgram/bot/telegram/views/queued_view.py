"""How a message sent while the agent works is acknowledged, and how the acknowledgement follows
what becomes of it (issue 30).

The acknowledgement ("📝 Noted — I'll read this at my next step", or "⏭ … once I finish" with
``agent.queued_default: after``) carries ⚡ Now, ⏭ After and 🗑 Cancel
(:mod:`..handlers.queued`). It is edited, its buttons gone, when the choice is made ("⚡ Stopping to
start on this now", "⏭ Will run next", "🗑 Cancelled") or when the running turn folds the message
in ("📝 Folded in at step 3", from the runtime's ``MessagesRead``). Which bot message
acknowledged which message (by its session and place in the session's mail) is kept in the
runtime's key-value store (:func:`ack_key` → ``chat:message``), so a restart still edits it; the
key goes once the acknowledgement is final.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import ButtonAction, key_button
from agentgram.bot.telegram.core.port import BotApi, Keyboard
from agentgram.bot.telegram.core.sender import edit_html
from agentgram.runtime.door.protocols import KeyValueStore
from agentgram.runtime.infra.i18n import Translator

_KEY = "queued-ack"
CHOICES = (
    (ButtonAction.QUEUED_NOW, "btn-queued-now"),
    (ButtonAction.QUEUED_AFTER, "btn-queued-after"),
    (ButtonAction.QUEUED_CANCEL, "btn-queued-cancel"),
)


def ack_key(session_id: int, seq: int) -> str:
    """The key-value store's key of the acknowledgement of message ``seq`` of ``session_id``."""
    return f"{_KEY}:{session_id}:{seq}"


def keyboard(t: Translator, lang: str | None, session_id: int, seq: int) -> Keyboard:
    """⚡ Now · ⏭ After · 🗑 Cancel, for message ``seq`` of session ``session_id``."""
    arg = f"{session_id}_{seq}"
    return Keyboard([[key_button(t.t(lang, label), action, arg) for action, label in CHOICES]])


def target(arg: str) -> tuple[int, int] | None:
    """The (session id, mail seq) a button names; ``None`` for anything else."""
    session, _, seq = arg.partition("_")
    if not (session.isascii() and session.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    return int(session), int(seq)


async def remember(values: KeyValueStore, session_id: int, seq: int, chat_id: int, message_id: int) -> None:
    await values.set_value(ack_key(session_id, seq), f"{chat_id}:{message_id}")


async def settle(values: KeyValueStore, bot: BotApi, session_id: int, seq: int, html: str) -> None:
    """The acknowledgement of message ``seq`` edited to ``html``, its buttons gone (if the chat
    still has one: nothing when it was settled already)."""
    key = ack_key(session_id, seq)
    stored = await values.get_value(key)
    if stored is None:
        return
    chat, _, message = stored.partition(":")
    await values.delete_value(key)  # first: a second event for it edits nothing
    await edit_html(bot, int(chat), int(message), html)
