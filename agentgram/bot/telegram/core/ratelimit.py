"""Which Bot API calls the drivers' rate limiters meter: PTB's ``AIORateLimiter``
(:class:`~.drivers.ptb.MessageRateLimiter`) and aiogram's session middleware
(:mod:`.drivers.aiogram`) both read these two sets.

Telegram's published guidance limits *messages* (about 30 per second
overall, one per second per chat, 20 per minute per group). PTB's limiter
meters every request that names a chat, so typing actions, reactions and
callback answers eat the message budget: with three such calls per turn a
busy bot stalls well below Telegram's real limit. These endpoints skip the
budget here but keep PTB's 429 handling (``retry_after`` honoured, retried up
to ``telegram.max_retries`` times) — except a button's answer, which is only
useful within seconds: it skips the limiter, and
:func:`bot.telegram.handlers.buttons.answer` retries it on its own terms —
and a draft (``sendMessageDraft``), a preview that posts no message and that
:func:`bot.telegram.sender.send_draft` tries once: a 429 on it must not pause
every other request while PTB retries it.
"""

from __future__ import annotations

UNMETERED = frozenset({"sendChatAction", "setMessageReaction", "answerCallbackQuery"})
UNLIMITED = frozenset({"answerCallbackQuery", "sendMessageDraft"})
