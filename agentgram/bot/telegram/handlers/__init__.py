"""Handler files, joined in one place (aiogram's multi-file-bot layout).

Each file exports a :class:`~bot.telegram.router.Router` and registers nothing
when imported. :func:`join` is the one list of them, in the order the dispatch tries
them: the access gate first (its own group, so it sees every update), the
unknown-command fallback last. :func:`dispatcher` makes the dispatch of them,
with the one button dispatch that routes presses by the joined table.
"""

from __future__ import annotations

from agentgram.bot.telegram.core import router as routers
from agentgram.bot.telegram.core.router import Dispatcher, JoinedRouter
from agentgram.bot.telegram.handlers import (
    access,
    approvals,
    buttons,
    commands,
    context,
    jobs,
    mcp,
    messages,
    models,
    questions,
    queued,
    rollback,
    schedule,
    sessions,
    skills,
    todos,
    trace,
)


def join() -> JoinedRouter:
    """Every handler file's router; an action claimed twice raises here, at start."""
    return routers.join(
        access.router,
        commands.router,
        approvals.router,
        schedule.router,
        models.router,
        questions.router,
        todos.router,
        skills.router,
        mcp.router,
        jobs.router,
        sessions.router,
        rollback.router,
        queued.router,
        context.router,
        trace.router,
        messages.router,
        commands.fallback,
    )


def dispatcher(joined: JoinedRouter) -> Dispatcher:
    """The joined handlers, with the one button dispatch first among the features' (a callback
    query matches no other handler, so where it sits is moot)."""
    return Dispatcher.of(joined, first=(buttons.dispatch(joined.buttons),))


__all__ = ["dispatcher", "join"]
