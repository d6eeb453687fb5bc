"""``search_history``: the model searches what was said in this chat's past conversations.

Every conversation of the chat counts, ended ones (before a ``/new``) too;
the search is :class:`~runtime.storage.search.HistorySearch` (SQLite FTS5).
Each hit is one line: its date, who said it, a short snippet with the
matched words in ``**``. It only reads this chat's own history, so it is
allowed by default (``runtime/approvals/rules.py``); a session without a
chat (none today) gets an error it can read.
"""

from __future__ import annotations

from datetime import tzinfo

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.search import HistorySearch, SearchHit

DEFAULT_LIMIT = 8


class SearchHistoryArgs(ToolArgs):
    query: str = Field(min_length=1, description="Words to look for; every word must occur (prefixes match).")
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=50, description="At most this many hits.")


class SearchHistory(Tool[SearchHistoryArgs]):
    name = "search_history"
    description = (
        "Search the past conversations of this chat (earlier sessions too, before /new) for words the "
        "user or you said. Returns the best matches, each with its date and a short snippet. Use it when "
        "the user refers to something discussed before that is not in the current conversation."
    )
    group = ToolGroup.OTHER
    idempotent = True
    Args = SearchHistoryArgs

    def __init__(self, search: HistorySearch, timezone: tzinfo) -> None:
        self._search = search
        self._timezone = timezone

    async def execute(self, args: SearchHistoryArgs, ctx: ToolContext) -> str:
        if ctx.chat_id is None:
            raise ToolError("this session belongs to no chat, so it has no past conversations to search")
        hits = await self._search.search(ctx.chat_id, args.query, args.limit)
        if not hits:
            return f"No past messages of this chat match {args.query!r}."
        return "\n".join(self.line(hit) for hit in hits)

    def line(self, hit: SearchHit) -> str:
        when = hit.said_at.astimezone(self._timezone).strftime("%Y-%m-%d %H:%M")
        who = "user" if hit.role == "user" else "assistant"
        return f"- {when} ({who}): {hit.marked('**', '**')}"


__all__ = ["SearchHistory", "SearchHistoryArgs"]
