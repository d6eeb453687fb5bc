"""How an approval request looks in the chat: text, keyboard, and the full text when it was cut.

The prompt must show exactly what will run, so anything too long to show
inline (a long diff, command or argument list) is cut at a line break with a
note, and its full text is attached as a document. Arguments are pretty JSON
with each long string value cut on its own (:data:`VALUE_SHOWN`), so one long
value does not push the other keys out of sight; an MCP tool's prompt names its
server and the tool's own name there rather than ``mcp__<server>__<tool>``. A
call that only reads a path is one line in words (:func:`~bot.shown.read_wording`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentgram.bot.shown import decision_key, read_wording
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.app import ApprovalStatus
from agentgram.runtime.infra.events import ApprovalDetails
from agentgram.runtime.infra.i18n import Translator

MAX_SHOWN = 3000
"""Characters of command/diff/arguments shown inline; longer ones are cut with a note."""
VALUE_SHOWN = 200
"""Characters of one string in the shown arguments (and of a name in the header)."""


@dataclass(slots=True, frozen=True)
class Attachment:
    """The full text of a command, diff or arguments that was cut in the prompt."""

    filename: str
    text: str


@dataclass(slots=True, frozen=True)
class Prompt:
    html: str
    keyboard: Keyboard
    attachment: Attachment | None = None  # sent as a document, in reply to the prompt
    body: str = ""  # ``html`` without the reply hint: what the decided prompt keeps (decided_prompt)


def approval_prompt(t: Translator, lang: str | None, request_id: str, details: ApprovalDetails) -> Prompt:
    lines, attachment = _body(t, lang, details)
    body = "\n".join([t.t(lang, "approval-title"), *lines])
    html = f"{body}\n<i>{t.t(lang, 'approval-reply-hint')}</i>"
    keyboard = approval_keyboard(t, lang, request_id, always=details.can_always)
    return Prompt(html, keyboard, attachment, body)


def decided_prompt(body: str, decision: str) -> str:
    """A decided prompt: what it asked (no reply hint: a reply rejects nothing any more), then
    the decision (:func:`decision_line`) in bold."""
    return f"{body}\n\n<b>{decision}</b>"


def _body(t: Translator, lang: str | None, details: ApprovalDetails) -> tuple[list[str], Attachment | None]:
    """What will happen: the command and its directory, the file's diff, the path read, or the raw
    arguments."""
    if details.command is not None:
        header = t.t(lang, "approval-command", workdir=escape(details.workdir or "."))
        return _shown(t, lang, header, details.command, None, "command.sh")
    if details.path is not None and details.diff is not None:
        header = t.t(lang, "approval-file", path=escape(details.path))
        if details.new_file:
            header += " " + t.t(lang, "approval-new-file")
        if not details.diff.strip():  # a write that changes nothing: say so, not an empty diff
            key = "approval-empty-file" if details.new_file else "approval-no-change"
            return [header, f"<i>{t.t(lang, key)}</i>"], None
        return _shown(t, lang, header, details.diff, "diff", "change.diff")
    read = read_wording(details)
    if read is not None:
        key, params = read
        return [t.t(lang, key, **{name: escape(value) for name, value in params.items()})], None
    whole = _pretty(details.arguments)
    header = _arguments_header(t, lang, details)
    return _shown(t, lang, header, _pretty(_shortened(details.arguments)), "json", "arguments.json", whole)


def _arguments_header(t: Translator, lang: str | None, details: ApprovalDetails) -> str:
    if details.mcp_server is None or details.mcp_tool is None:
        return t.t(lang, "approval-args", tool=escape(details.tool_name))
    server, tool = _short(details.mcp_server), _short(details.mcp_tool)
    return t.t(lang, "approval-mcp", name=escape(server), tool=escape(tool))


def _shown(
    t: Translator,
    lang: str | None,
    header: str,
    text: str,
    language: str | None,
    filename: str,
    whole: str | None = None,
) -> tuple[list[str], Attachment | None]:
    """``text`` under ``header``, cut when too long; ``whole`` is what ``text`` is a shortened
    form of (itself when not given), attached when anything of it is not shown."""
    whole = text if whole is None else whole
    shown, cut = _cut(text)
    lines = [header, _pre(shown, language)]
    if not cut and text == whole:
        return lines, None
    return [*lines, t.t(lang, "approval-diff-cut")], Attachment(filename, whole)


def _pretty(arguments: object) -> str:
    return json.dumps(arguments, ensure_ascii=False, indent=2)


def _shortened(value: object) -> object:
    """``value`` with every string in it cut to :data:`VALUE_SHOWN` (:func:`_short`)."""
    if isinstance(value, str):
        return _short(value)
    if isinstance(value, dict):
        return {key: _shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item) for item in value]
    return value


def _short(text: str) -> str:
    return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 1] + "…"


def approval_keyboard(t: Translator, lang: str | None, request_id: str, *, always: bool = True) -> Keyboard:
    """Approve / Reject, then ⏱ 15 min and — when a saved rule could cover the call
    (``ApprovalDetails.can_always``) — 🔁 Always."""

    def button(label: str, action: ButtonAction) -> KeyButton:
        return KeyButton(t.t(lang, label), callback_data=encode(Button(action, request_id)))

    trust = [button("btn-trust-15", ButtonAction.TRUST_15)]
    if always:
        trust.append(button("btn-trust-always", ButtonAction.ALWAYS))
    return Keyboard(
        [[button("btn-approve", ButtonAction.APPROVE), button("btn-reject", ButtonAction.REJECT)], trust]
    )


REASON_SHOWN = 300
"""Characters of a rejection reason repeated under the prompt (the model reads all of it)."""


def decision_line(t: Translator, lang: str | None, status: str, reason: str | None) -> str:
    """What the prompt ends with once decided; the prompt plus this line stays within one message."""
    if status == ApprovalStatus.REJECTED and reason:
        shown = reason if len(reason) <= REASON_SHOWN else reason[: REASON_SHOWN - 1] + "…"
        return t.t(lang, "approval-rejected-reason", reason=escape(shown))
    return t.t(lang, decision_key(status, reason))


def _cut(text: str) -> tuple[str, bool]:
    """At most :data:`MAX_SHOWN` characters, ending at a line break when one is near."""
    if len(text) <= MAX_SHOWN:
        return text, False
    head = text[:MAX_SHOWN]
    newline = head.rfind("\n")
    if newline > MAX_SHOWN // 2:
        head = head[: newline + 1]
    return head.rstrip("\n") + "\n…", True


def _pre(text: str, language: str | None = None) -> str:
    body = escape(text)
    if language:
        return f'<pre><code class="language-{language}">{body}</code></pre>'
    return f"<pre>{body}</pre>"
