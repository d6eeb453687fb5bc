"""``/mcp``: the configured MCP servers, each with its state, its tool count and whether this
chat activated it.

What it shows comes from :meth:`agentgram.runtime.app.Runtime.mcp_overview`; the handler only
words it. Design choices: a server that failed without ever listing its tools shows only why it
failed (a tool count of "not started yet" would add nothing to the reason); whether a server is
activated is shown for lazy servers only, as a ``lazy: false`` server's tools are always offered.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import BotContext, bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.capabilities.mcp.catalog import McpServerStatus
from agentgram.runtime.capabilities.mcp.servers import ServerState

REASON_SHOWN = 300
"""Characters of a failed server's reason shown (the log has all of it)."""


async def mcp(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    servers = await ctx.runtime.sessions.mcp_overview(await ctx.session(update))
    if not servers:
        await send_html(context.bot, chat.id, ctx.text(update, "mcp-none"))
        return
    lines = [ctx.text(update, "mcp-title"), *(_server_line(update, ctx, server) for server in servers)]
    await send_html(context.bot, chat.id, "\n".join(lines))


def _server_line(update: Update, ctx: BotContext, server: McpServerStatus) -> str:
    status = " · ".join(_status_parts(update, ctx, server))
    name = escape(server.name)
    if server.description:
        description = escape(server.description)
        return ctx.text(update, "mcp-item-described", name=name, description=description, status=status)
    return ctx.text(update, "mcp-item", name=name, status=status)


def _status_parts(update: Update, ctx: BotContext, server: McpServerStatus) -> list[str]:
    """State, then the tool count, then (lazy servers) whether this chat activated it."""
    if server.state == ServerState.FAILED:
        parts = [ctx.text(update, "mcp-failed", reason=escape(_short(server.reason or "?")))]
    else:
        parts = [ctx.text(update, f"mcp-{server.state.value}")]
    if server.tools is not None:
        parts.append(ctx.text(update, "mcp-tools", count=server.tools))
    elif server.state != ServerState.FAILED:
        parts.append(ctx.text(update, "mcp-not-started"))
    if server.lazy:
        parts.append(ctx.text(update, "mcp-activated" if server.activated else "mcp-not-activated"))
    return parts


def _short(reason: str) -> str:
    return reason if len(reason) <= REASON_SHOWN else reason[: REASON_SHOWN - 1] + "…"


router = Router("mcp", handlers=(Command("mcp", mcp),))
