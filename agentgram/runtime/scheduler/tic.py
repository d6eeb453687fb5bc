"""The pure parts of a tic: whether to run one, what it is told, what counts as silence.

A tic calls the model only when there is something to look at (a non-empty
``TIC.md``, a configured prompt, or pending events), never during quiet hours
and never while the user's own turn runs in the home chat. Its reply is
delivered unless it is empty or exactly :data:`TIC_OK`. Each rule lives in
one function here; the runtime wiring only calls them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import ClassVar, Literal

from agentgram.runtime.infra.config import QuietHours
from agentgram.runtime.infra.storage.scheduler_rows import TicRunStatus
from agentgram.runtime.scheduler.quiet import is_quiet, quiet_ends_at

TIC_OK = "TIC_OK"
TIC_FILE = "TIC.md"
MAX_EVENTS = 50
"""Pending events listed one by one; the rest are counted."""

TIC_INSTRUCTIONS = f"""\
This is a scheduled check-in (a tic), not a message from the user. Nobody is \
waiting for an answer and you cannot ask questions; actions that need approval \
will be denied.
Go through the checklist and the events below. If something is worth telling \
the user now, reply with a short message for them. If there is nothing worth \
reporting, reply with exactly {TIC_OK} and nothing else."""


def is_tic_ok(reply: str | None) -> bool:
    """Whether a tic's reply means "nothing to report" and must not be delivered."""
    text = (reply or "").strip()
    return text in ("", TIC_OK)


# --- is there anything to look at? -------------------------------------------

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_EMPTY_LINE = re.compile(r"^\s*(?:#+.*|[-*+]\s*(?:\[[ xX]?\])?\s*)?$")


def checklist_text(tic_md: str | None) -> str | None:
    """``TIC.md`` as worth sending, or ``None`` when it holds only headings, blanks, comments."""
    if tic_md is None:
        return None
    text = _COMMENT.sub("", tic_md)
    if all(_EMPTY_LINE.match(line) for line in text.splitlines()):
        return None
    return tic_md.strip()


def read_tic_md(workdir: Path) -> str | None:
    """The raw ``TIC.md`` in ``workdir``, or ``None`` if there is none."""
    try:
        return (workdir / TIC_FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None


def tic_has_work(tic_md: str | None, prompt: str | None, pending_events: Sequence[str]) -> bool:
    return bool(
        checklist_text(tic_md) or (prompt and prompt.strip()) or any(e.strip() for e in pending_events)
    )


# --- the tic's input -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TicInput:
    """What a tic is told, as the text of its synthetic user message."""

    header: str
    prompt: str | None = None
    checklist: str | None = None
    events: tuple[str, ...] = ()

    def render(self) -> str:
        parts = [self.header, TIC_INSTRUCTIONS]
        if self.prompt:
            parts.append(f"Instruction:\n{self.prompt}")
        if self.checklist:
            parts.append(f"Checklist ({TIC_FILE}):\n{self.checklist}")
        if self.events:
            parts.append("Since the last tic:\n" + _digest(self.events))
        return "\n\n".join(parts)


def tic_header(now: datetime, tz: tzinfo) -> str:
    """``[TIC] 2026-03-29T08:00:00+02:00 Europe/Berlin``."""
    local = now.astimezone(tz)
    name = getattr(tz, "key", None) or local.tzname()
    return f"[TIC] {local.isoformat(timespec='seconds')} {name}"


def build_tic_input(
    now: datetime,
    tz: tzinfo,
    *,
    prompt: str | None,
    tic_md: str | None,
    pending_events: Sequence[str],
) -> TicInput:
    return TicInput(
        header=tic_header(now, tz),
        prompt=prompt.strip() if prompt and prompt.strip() else None,
        checklist=checklist_text(tic_md),
        events=tuple(e.strip() for e in pending_events if e.strip()),
    )


def _digest(events: Sequence[str]) -> str:
    lines = [f"- {event}" for event in events[:MAX_EVENTS]]
    if len(events) > MAX_EVENTS:
        lines.append(f"- … and {len(events) - MAX_EVENTS} more")
    return "\n".join(lines)


# --- run, skip or defer ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    kind: Literal["run"] = field(default="run", init=False)
    status: ClassVar[TicRunStatus] = TicRunStatus.RAN
    reason: ClassVar[str | None] = None


@dataclass(frozen=True, slots=True)
class SkipNothingToDo:
    kind: Literal["skip_nothing_to_do"] = field(default="skip_nothing_to_do", init=False)
    status: ClassVar[TicRunStatus] = TicRunStatus.SKIPPED
    reason: ClassVar[str | None] = "nothing to do"


@dataclass(frozen=True, slots=True)
class DeferBusy:
    """Run right after the user's turn in the home chat ends."""

    kind: Literal["defer_busy"] = field(default="defer_busy", init=False)
    status: ClassVar[TicRunStatus] = TicRunStatus.DEFERRED
    reason: ClassVar[str | None] = "user turn running"


@dataclass(frozen=True, slots=True)
class SkipQuiet:
    until: datetime  # when quiet hours end (aware UTC)
    kind: Literal["skip_quiet"] = field(default="skip_quiet", init=False)
    status: ClassVar[TicRunStatus] = TicRunStatus.SKIPPED
    reason: ClassVar[str | None] = "quiet hours"


TicDecision = Run | SkipNothingToDo | DeferBusy | SkipQuiet


def decide_tic(
    now: datetime,
    quiet: QuietHours | None,
    tz: tzinfo,
    *,
    user_turn_running: bool,
    has_work: bool,
) -> TicDecision:
    """Quiet hours first, then nothing to do (final, so no wake-up is wasted), then busy."""
    if is_quiet(quiet, now, tz):
        return SkipQuiet(until=quiet_ends_at(quiet, now, tz))
    if not has_work:
        return SkipNothingToDo()
    if user_turn_running:
        return DeferBusy()
    return Run()
