"""How an approval request looks in the chat: text, keyboard, optional full diff."""

from __future__ import annotations

import json
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.telegram.callback_data import Button, ButtonAction, encode
from bot.telegram.render import escape
from runtime.events import ApprovalDetails
from runtime.i18n import Translator

MAX_SHOWN = 3000
"""Characters of command/diff/arguments shown inline; longer ones are cut with a note."""


@dataclass(slots=True, frozen=True)
class Prompt:
    html: str
    keyboard: InlineKeyboardMarkup
    full_diff: str | None = None  # attached as a document when the inline diff was cut


def approval_prompt(t: Translator, lang: str | None, request_id: str, details: ApprovalDetails) -> Prompt:
    lines = [t.t(lang, "approval-title")]
    full_diff = None
    if details.command is not None:
        lines.append(t.t(lang, "approval-command", workdir=escape(details.workdir or ".")))
        lines.append(_pre(_cut(details.command)[0]))
    elif details.path is not None and details.diff is not None:
        header = t.t(lang, "approval-file", path=escape(details.path))
        if details.new_file:
            header += " " + t.t(lang, "approval-new-file")
        lines.append(header)
        shown, cut = _cut(details.diff)
        lines.append(_pre(shown, language="diff"))
        if cut:
            lines.append(t.t(lang, "approval-diff-cut"))
            full_diff = details.diff
    else:
        lines.append(t.t(lang, "approval-args", tool=escape(details.tool_name)))
        pretty = json.dumps(details.arguments, ensure_ascii=False, indent=2)
        lines.append(_pre(_cut(pretty)[0], language="json"))
    lines.append(f"<i>{t.t(lang, 'approval-reply-hint')}</i>")
    return Prompt("\n".join(lines), approval_keyboard(t, lang, request_id), full_diff)


def approval_keyboard(t: Translator, lang: str | None, request_id: str) -> InlineKeyboardMarkup:
    def button(label: str, action: ButtonAction) -> InlineKeyboardButton:
        return InlineKeyboardButton(t.t(lang, label), callback_data=encode(Button(action, request_id)))

    return InlineKeyboardMarkup(
        [
            [button("btn-approve", ButtonAction.APPROVE), button("btn-reject", ButtonAction.REJECT)],
            [button("btn-trust-15", ButtonAction.TRUST_15), button("btn-trust-always", ButtonAction.ALWAYS)],
        ]
    )


def decision_line(t: Translator, lang: str | None, status: str, reason: str | None) -> str:
    if status == "approved":
        return t.t(lang, "approval-approved")
    if status == "rejected":
        return (
            t.t(lang, "approval-rejected-reason", reason=escape(reason))
            if reason
            else t.t(lang, "approval-rejected")
        )
    if status == "expired":
        return t.t(lang, "approval-expired")
    return t.t(lang, "approval-cancelled")


def _cut(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_SHOWN:
        return text, False
    return text[:MAX_SHOWN] + "\n…", True


def _pre(text: str, language: str | None = None) -> str:
    body = escape(text)
    if language:
        return f'<pre><code class="language-{language}">{body}</code></pre>'
    return f"<pre>{body}</pre>"
