"""The Telegram adapter on python-telegram-bot.

It owns what only Telegram has: the update stream (:mod:`.ingest`, durable
``getUpdates`` offsets), the handlers (one :class:`~.router.Router` per file
in :mod:`.handlers`, joined at start), the chat-side wording and HTML
(:mod:`.render`, :mod:`.split`, :mod:`.prompts`, :mod:`.reports`,
:mod:`.wording`), sending with retry policies (:mod:`.sender`), and turning
runtime events into messages, edits and status lines (:mod:`.delivery`).
:func:`.app.compose` builds one running bot from its settings.
"""
