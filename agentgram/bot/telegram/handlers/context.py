"""/context, /compact and /search, and the button that opens a found exchange.

``/context`` shows how big the next request is (measured by the provider, or
estimated as characters ÷ 4), the compaction threshold and what the summary
in force covers. ``/compact`` summarises the older history now
(:meth:`Runtime.compact`). ``/search <words>`` lists the chat's past
messages that match — ended conversations too — each with its date and a
short snippet, the matched words in bold, and one numbered button per hit
that sends the whole exchange (the user's message and the answer).
"""

from __future__ import annotations

from datetime import datetime

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext, bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.render import escape, markdown_to_html
from agentgram.bot.telegram.views.wording import local_time
from agentgram.runtime.app import MARK_END, MARK_START, CompactionOutcome, SearchHit

SEARCH_HITS = 8
"""Hits ``/search`` lists (one button each)."""
BUTTONS_PER_ROW = 4


async def _say(update: Update, ctx: BotContext, html: str, markup: Keyboard | None = None) -> None:
    await send_html(update.get_bot(), update.chat_id, html, reply_markup=markup)


def _when(update: Update, ctx: BotContext, moment: datetime) -> str:
    return local_time(ctx.translator, ctx.lang(update), moment, ctx.runtime.timezone)


# --- /context and /compact -----------------------------------------------------------------


async def context_(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    usage = await ctx.runtime.chat.context_usage(await ctx.session(update))
    lines = [
        ctx.text(
            update,
            "context-tokens",
            tokens=usage.tokens,
            how=ctx.text(update, "context-measured" if usage.measured else "context-estimated"),
        ),
        ctx.text(update, "context-messages", messages=usage.messages),
    ]
    if usage.threshold is None:
        lines.append(ctx.text(update, "context-compaction-off"))
    else:
        lines.append(ctx.text(update, "context-threshold", threshold=usage.threshold, keep=usage.keep_recent))
    if usage.summary is None:
        lines.append(ctx.text(update, "context-no-summary"))
    else:
        lines.append(
            ctx.text(
                update,
                "context-summary",
                rows=usage.summary.covered_rows,
                until=_when(update, ctx, usage.summary.covers_until),
                made=_when(update, ctx, usage.summary.created_at),
            )
        )
    await _say(update, ctx, "\n".join(lines))


_COMPACT_KEYS = {
    CompactionOutcome.COMPACTED: "compact-done",
    CompactionOutcome.NOTHING_TO_COMPACT: "compact-nothing",
    CompactionOutcome.FAILED: "compact-failed",
    CompactionOutcome.BUSY: "compact-busy",
    CompactionOutcome.OFF: "compact-off",
}


async def compact(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    report = await ctx.runtime.chat.compact(await ctx.session(update))
    await _say(update, ctx, ctx.text(update, _COMPACT_KEYS[report.outcome], rows=report.folded_rows))


# --- /search ---------------------------------------------------------------------------------


async def search(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    words = " ".join(context.args or []).strip()
    if not words:
        await _say(update, ctx, ctx.text(update, "search-usage"))
        return
    hits = await ctx.runtime.chat.search_history(update.chat_id, words, SEARCH_HITS)
    if not hits:
        await _say(update, ctx, ctx.text(update, "search-none", words=escape(words)))
        return
    lines = [ctx.text(update, "search-found", count=len(hits), words=escape(words))]
    lines += [_hit_line(update, ctx, number, hit) for number, hit in enumerate(hits, start=1)]
    await _say(update, ctx, "\n\n".join(lines), _open_buttons(hits))


def _hit_line(update: Update, ctx: BotContext, number: int, hit: SearchHit) -> str:
    who = ctx.text(update, "search-by-user" if hit.role == "user" else "search-by-assistant")
    return f"{number}. <i>{escape(_when(update, ctx, hit.said_at))}</i> {who}\n{_bold_matches(hit)}"


def _bold_matches(hit: SearchHit) -> str:
    """The snippet escaped, its matched words in bold (the marks are not HTML, so escape first)."""
    return escape(hit.snippet).replace(MARK_START, "<b>").replace(MARK_END, "</b>")


def _open_buttons(hits: list[SearchHit]) -> Keyboard:
    keys = [
        KeyButton(f"📖 {number}", callback_data=encode(Button(ButtonAction.OPEN_EXCHANGE, str(hit.row_id))))
        for number, hit in enumerate(hits, start=1)
    ]
    return Keyboard([keys[i : i + BUTTONS_PER_ROW] for i in range(0, len(keys), BUTTONS_PER_ROW)])


async def open_exchange(update: Update, ctx: BotContext, button: Button) -> None:
    exchange = (
        await ctx.runtime.chat.exchange(update.chat_id, int(button.arg)) if button.arg.isdigit() else None
    )
    if exchange is None:
        await buttons.answer(update, ctx.text(update, "search-gone"))
        return
    text = ctx.text(
        update,
        "search-exchange",
        when=escape(_when(update, ctx, exchange.asked_at)),
        question=escape(exchange.question) or "—",
        answer=markdown_to_html(exchange.answer) if exchange.answer else ctx.text(update, "search-no-answer"),
    )
    await _say(update, ctx, text)
    await buttons.answer(update)


router = Router(
    "context",
    handlers=(
        Command("context", context_),
        Command("compact", compact),
        Command("search", search),
    ),
    buttons={ButtonAction.OPEN_EXCHANGE: open_exchange},
)
