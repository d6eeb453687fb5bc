"""How the terminal shows things: Rich renderables for answers, status lines, prompts and notes.

The locales hold the small HTML subset the chat adapters share (``<b>``,
``<i>``, ``<code>``, ``<pre>``, ``<a>``); :func:`html_text` turns it into Rich
text, so the terminal words everything with the same strings as Telegram
(parameters HTML-escaped first, as there). The model's answers are Markdown,
rendered by Rich's :class:`~rich.markdown.Markdown`.

Everything not ours (the model's text, tool names and summaries, commands,
diffs, questions, the history, job titles) passes :func:`clean` before it
becomes a renderable: Rich drops only some control characters, and the
terminal's output is written raw, so an ESC in a reply could clear the screen,
fake a prompt or set the clipboard (OSC 52).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from agentgram.bot.shown import PHASE_MARK, job_state, read_wording
from agentgram.runtime.infra.events import ApprovalDetails, QuestionAsked, ToolPhase
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.scheduler.values import Job

_STYLES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "code": "cyan",
    "pre": "cyan",
    "a": "underline",
}
ENDED = frozenset(
    {ToolPhase.DONE, ToolPhase.FAILED, ToolPhase.REJECTED, ToolPhase.CANCELLED, ToolPhase.DETACHED}
)
"""Phases after which a call's line is printed (before, it shows in the bottom bar)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters but newline and tab (ESC and CSI among them)."""


def clean(text: str) -> str:
    """``text`` without control characters, safe to show in the user's terminal."""
    return _CONTROL.sub("", text)


class _RichText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text = Text()
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open.append(_STYLES.get(tag, ""))

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data, style=" ".join(s for s in self._open if s) or None)


def html_text(markup: str) -> Text:
    """A locale message's HTML subset as Rich text."""
    parser = _RichText()
    parser.feed(markup)
    parser.close()
    return parser.text


def worded(t: Translator, key: str, **params: str | int) -> Text:
    """The locale message ``key`` in the default language, its text parameters escaped."""
    escaped = {k: html.escape(clean(v), quote=False) if isinstance(v, str) else v for k, v in params.items()}
    return html_text(t.t(None, key, **escaped))


class _LinesKept(Markdown):
    """Rich's Markdown with every line break of the text kept, as the Telegram adapter shows it.

    CommonMark joins the lines of a paragraph (a soft break renders as a space), which showed a
    two-line result the model quoted, or a multi-line answer, on one line in the terminal only.
    """

    def __init__(self, markup: str) -> None:
        super().__init__(markup)
        for token in self.parsed:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"


def answer(markdown: str) -> Markdown:
    """The model's Markdown as the terminal shows it: rendered, control characters gone, each
    line on its own line (:class:`_LinesKept`)."""
    return _LinesKept(clean(markdown))


def helper_label(t: Translator, name: str, session_id: int) -> Text:
    """``🤖 researcher (session 7):``, the line a helper's answer, failure or notice shows under
    (a session the terminal's spawned, issue 29; ``name``: its own, else its agent's)."""
    return worded(t, "spawned-label", name=name, id=str(session_id)).append(":")


def helper_asks(t: Translator, name: str, session_id: int) -> Text:
    """``🤖 researcher (session 7) asks:``, above a helper's approval prompt or question."""
    return worded(t, "spawned-asks", name=name, id=str(session_id))


def tool_line(name: str, summary: str, phase: ToolPhase, runs_command: bool) -> Text:
    line = Text("⚙ " if runs_command else "🔧 ", style="dim")
    line.append(clean(name), style="bold")
    if summary:
        line.append(" · ").append(clean(summary), style="cyan")
    return line.append(f" {PHASE_MARK[phase]}")


def approval_prompt(t: Translator, details: ApprovalDetails, minutes: int) -> RenderableType:
    """The call to approve as the user must see it, then how to answer."""
    parts: list[RenderableType] = [worded(t, "terminal-approval-title", tool=details.tool_name)]
    if details.command is not None:
        parts.append(worded(t, "terminal-approval-command", workdir=details.workdir or ""))
        parts.append(Padding(Syntax(clean(details.command), "bash", word_wrap=True), (0, 2)))
    elif details.path is not None:
        parts.append(worded(t, "terminal-approval-file", path=details.path))
        if details.diff:
            parts.append(Padding(Syntax(clean(details.diff), "diff", word_wrap=True), (0, 2)))
    elif (read := read_wording(details)) is not None:
        key, params = read
        parts.append(worded(t, key, **params))
    else:
        arguments = json.dumps(details.arguments, ensure_ascii=False, indent=2)
        parts.append(Padding(Syntax(clean(arguments), "json", word_wrap=True), (0, 2)))
    hint = "terminal-approval-answer" if details.can_always else "terminal-approval-answer-no-always"
    parts.append(worded(t, hint, minutes=minutes))
    return Group(*parts)


def question(t: Translator, event: QuestionAsked) -> RenderableType:
    lines: list[RenderableType] = [html_text(t.t(None, "question-title")), Text(clean(event.question))]
    lines += [Text(f"  {n}. {clean(option)}") for n, option in enumerate(event.options, start=1)]
    hint = "terminal-question-options" if event.options else "question-type-hint"
    lines.append(worded(t, hint))
    return Group(*lines)


def you(text: str) -> Text:
    """A message of the user's as the history shows it again."""
    return Text("› ", style="bold green").append(clean(text))


def cron_item(t: Translator, job: Job) -> Text:
    """One job as ``/cron`` lists it: its state, title, id, schedule as typed and next run."""
    state = job_state(job).value
    when = job.next_run.astimezone(job.zone).strftime("%Y-%m-%d %H:%M") if job.next_run else "—"
    return worded(
        t,
        "terminal-cron-item",
        state=state,
        title=job.title,
        id=str(job.id),
        schedule=job.schedule,
        next=when,
    )
