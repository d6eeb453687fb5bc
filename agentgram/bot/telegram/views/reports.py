"""Reports (tic reports, cron results, the quiet-hours digest) worded and rendered for Telegram.

The runtime's :class:`~runtime.events.Report` says what a report is; this
module is the one place that words it in the user's language and renders it
into Telegram HTML: a bold title, a blank line, then the body as Markdown
through the one renderer (:func:`~bot.telegram.render.markdown_to_html`).
A digest's body lists its results, oldest first, each under its own bold title.
"""

from __future__ import annotations

from agentgram.bot.telegram.views.render import escape, markdown_to_html
from agentgram.runtime.infra.events import CronResult, Digest, LocaleText, ModelText, ReportContent, TicResult
from agentgram.runtime.infra.i18n import Translator


def report_title(t: Translator, language: str | None, content: ReportContent) -> str:
    """The report's title as plain text."""
    match content:
        case CronResult(title=title):
            return t.t(language, "cron-result-title", title=title)
        case TicResult():
            return t.t(language, "tic-report-title")
        case Digest(items=items):
            return t.t(language, "quiet-hours-digest-title", count=len(items))


def report_markdown(t: Translator, language: str | None, content: ReportContent) -> str:
    """The report's body as Markdown: the model's words as written, the locale's otherwise."""
    match content:
        case CronResult(body=body) | TicResult(body=body):
            return _body(t, language, body)
        case Digest(items=items):
            return "\n\n".join(
                f"**{report_title(t, language, item)}**\n{report_markdown(t, language, item)}"
                for item in items
            )


def report_html(t: Translator, language: str | None, content: ReportContent) -> str:
    """The whole message in Telegram HTML."""
    title = f"<b>{escape(report_title(t, language, content))}</b>\n\n"
    return title + markdown_to_html(report_markdown(t, language, content))


def _body(t: Translator, language: str | None, body: ModelText | LocaleText) -> str:
    match body:
        case ModelText(text=text):
            return text
        case LocaleText(key=key, params=params):
            return t.t(language, key, **params)
