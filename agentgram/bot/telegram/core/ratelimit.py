"""Which Bot API calls the drivers' rate limiters meter: PTB's ``AIORateLimiter``
(:class:`~.drivers.ptb.MessageRateLimiter`) and aiogram's session middleware
(:mod:`.drivers.aiogram`) both read these two sets.

Telegram's published guidance limits *messages* (about 30 per second
overall, one per second per chat, 20 per minute per group). PTB's limiter
meters every request that names a chat, so typing actions, reactions and
callback answers eat the message budget: with three such calls per turn a
busy bot stalls well below Telegram's real limit. These endpoints skip the
budget here. A button's answer, only useful within seconds, and a draft
(``sendMessageDraft``), a preview that posts no message and is tried once,
skip the limiter altogether.

The limiters only pace: neither retries a 429. The chat queue
(:mod:`.chat_queue`) does, and pauses the chat (or every chat) for its ``retry_after``."""

from __future__ import annotations

UNMETERED = frozenset({"sendChatAction", "setMessageReaction", "answerCallbackQuery"})
UNLIMITED = frozenset({"answerCallbackQuery", "sendMessageDraft"})
