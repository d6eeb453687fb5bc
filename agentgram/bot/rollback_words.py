"""How ``/rollback`` is worded, alike in every chat adapter (Telegram HTML, Rich in a terminal).

Each function gives locale HTML (``<b>``, ``<code>``) made from the door's rollback values; an
adapter renders it as it renders any locale text and adds its own way to choose (buttons in
Telegram, a typed answer in the terminal). Paths and commands are escaped here.
"""

from __future__ import annotations

import html

from agentgram.runtime.capabilities.checkpoints import (
    ChangedTurn,
    FileSummary,
    RollbackOutcome,
    RollbackPreview,
    RollbackStatus,
)
from agentgram.runtime.infra.i18n import Translator

NAMES_SHOWN = 6
"""File names listed on one line before ``…``."""
FILES_SHOWN = 20
"""File lines a preview shows (the diff has them all)."""


def _code(text: str) -> str:
    return f"<code>{html.escape(text, quote=False)}</code>"


def names(paths: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(_code(p) for p in paths[:NAMES_SHOWN])
    return shown + (f", … (+{len(paths) - NAMES_SHOWN})" if len(paths) > NAMES_SHOWN else "")


def file_line(t: Translator, lang: str | None, f: FileSummary) -> str:
    path = html.escape(f.path, quote=False)
    if f.binary:
        return t.t(lang, "rollback-file-binary", path=path, how=f.how)
    return t.t(lang, f"rollback-file-{f.how}", path=path, added=f.added, removed=f.removed)


def skipped_lines(t: Translator, lang: str | None, turn: ChangedTurn) -> list[str]:
    return [
        t.t(
            lang,
            "rollback-skipped",
            path=html.escape(path, quote=False),
            reason=html.escape(why, quote=False),
        )
        for path, why in turn.skipped
    ]


def turn_item(t: Translator, lang: str | None, turn: ChangedTurn, when: str) -> str:
    """A turn as ``/rollback`` lists it: its one-line summary, then its files."""
    head = t.t(
        lang,
        "rollback-item",
        id=str(turn.turn_id),
        when=when,
        files=len(turn.files),
        added=turn.added,
        removed=turn.removed,
    )
    return head + "\n" + t.t(lang, "rollback-item-files", names=names([f.path for f in turn.files]))


def preview_text(t: Translator, lang: str | None, preview: RollbackPreview) -> str:
    """What undoing the turn undoes: its files, the later turns it takes along, what was skipped."""
    turn = preview.turn
    lines = [t.t(lang, "rollback-preview", id=str(turn.turn_id))]
    lines += _file_lines(t, lang, list(turn.files))
    if preview.later:
        ids = ", ".join(str(later.turn_id) for later in preview.later)
        lines.append(t.t(lang, "rollback-later", count=len(preview.later), ids=ids))
        lines += _file_lines(t, lang, [f for later in preview.later for f in later.files])
    for each in (turn, *preview.later):
        lines += skipped_lines(t, lang, each)[:FILES_SHOWN]
    return "\n".join(lines)


def _file_lines(t: Translator, lang: str | None, files: list[FileSummary]) -> list[str]:
    lines = [file_line(t, lang, f) for f in files[:FILES_SHOWN]]
    if len(files) > FILES_SHOWN:
        lines.append(t.t(lang, "rollback-more-files", count=len(files) - FILES_SHOWN))
    return lines


def changed_since_text(t: Translator, lang: str | None, turn_id: int, outcome: RollbackOutcome) -> str:
    """The second confirmation: it names every file the user changed since."""
    return t.t(
        lang,
        "rollback-changed-since",
        id=str(turn_id),
        count=len(outcome.changed),
        names=names(outcome.changed),
    )


def done_text(t: Translator, lang: str | None, outcome: RollbackOutcome) -> str:
    ids = ", ".join(str(turn_id) for turn_id in outcome.turn_ids)
    lines = [t.t(lang, "rollback-done", ids=ids)]
    if outcome.restored:
        lines.append(t.t(lang, "rollback-done-restored", names=names(outcome.restored)))
    if outcome.deleted:
        lines.append(t.t(lang, "rollback-done-deleted", names=names(outcome.deleted)))
    return "\n".join(lines)


def refusal_text(t: Translator, lang: str | None, outcome: RollbackOutcome) -> str | None:
    """Why the rollback did not run (a turn runs, a command runs, the turn is gone); ``None``
    when it ran or asks for a confirmation."""
    match outcome.status:
        case RollbackStatus.TURN_RUNNING:
            return t.t(lang, "rollback-turn-running")
        case RollbackStatus.COMMAND_RUNNING:
            command = outcome.command if len(outcome.command) <= 60 else outcome.command[:59] + "…"
            return t.t(lang, "rollback-command-running", command=_code(command))
        case RollbackStatus.GONE:
            return t.t(lang, "rollback-gone")
    return None


__all__ = [
    "changed_since_text",
    "done_text",
    "file_line",
    "names",
    "preview_text",
    "refusal_text",
    "skipped_lines",
    "turn_item",
]
