"""Sub-agents in the chat: "🤖 main → researcher" when one starts, "✅ researcher finished" with
the start of its answer when it ends (❌ when it gave none).

Each is a short silent message of its own, sent between the status lines of
the tools, so the chat reads as the work went. They are progress, not output:
not durable (a restart that cuts a child short says "continuing" and the
resumed child announces itself again), as tool status lines are not.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.sender import BRIEF, send_html
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.infra.events import SubAgentFinished, SubAgentStarted
from agentgram.runtime.infra.i18n import Translator


def agent_html(t: Translator, lang: str | None, event: SubAgentStarted | SubAgentFinished) -> str:
    if isinstance(event, SubAgentStarted):
        return t.t(lang, "subagent-started", parent=escape(event.parent), agent=escape(event.agent))
    key = "subagent-finished" if event.ok else "subagent-failed"
    line = t.t(lang, key, agent=escape(event.agent))
    return f"{line}\n<i>{escape(event.preview)}</i>" if event.preview else line


async def show(
    bot: BotApi, chat_id: int, t: Translator, lang: str | None, event: SubAgentStarted | SubAgentFinished
) -> None:
    await send_html(bot, chat_id, agent_html(t, lang, event), silent=True, retry=BRIEF)
