"""Handler groups, joined in one place (aiogram's multi-file-bot layout).

Group -1 is the access gate; group 0 holds the features. Within group 0 the
order matters only in that the unknown-command fallback comes last. Every
button press goes through the one dispatch in :mod:`.buttons`; the feature
modules imported here register their buttons there.
"""

from __future__ import annotations

from telegram.ext import Application

from agentgram.bot.telegram.handlers import access, approvals, buttons, commands, messages, schedule


def register(application: Application) -> None:  # type: ignore[type-arg]
    application.add_handler(access.handler(), group=-1)
    for handler in [
        *commands.handlers(),
        *buttons.handlers(),
        *approvals.handlers(),
        *schedule.handlers(),
        *messages.handlers(),
        commands.fallback(),
    ]:
        application.add_handler(handler)
