"""The terminal chat: ``agentgram chat``, a second adapter on the same runtime facade (see :mod:`bot.terminal.chat`)."""
