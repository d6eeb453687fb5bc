"""The Telegram adapter, on python-telegram-bot or aiogram (``telegram.library``, :mod:`.drivers`).

Only :mod:`.drivers` knows a Telegram library; the rest speaks to a
:class:`~.port.BotApi` and reads :mod:`.incoming` updates. It owns what only Telegram has: the update stream (:mod:`.ingest`, durable
``getUpdates`` offsets), the handlers (one :class:`~.router.Router` per file
in :mod:`.handlers`, joined at start), the chat-side wording and HTML
(:mod:`.render`, :mod:`.split`, :mod:`.prompts`, :mod:`.reports`,
:mod:`.wording`), sending with retry policies (:mod:`.sender`), and turning
runtime events into messages, edits and status lines (:mod:`.delivery`).
:func:`.app.compose` builds one running bot from its settings.
"""
