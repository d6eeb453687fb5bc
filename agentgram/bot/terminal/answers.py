"""What the user types, parsed: commands, answers to approval prompts and to questions.

Pure functions (no I/O): the chat (:mod:`bot.terminal.chat`) decides what to
do with each typed value. An approval is answered ``y`` / ``yes``, ``n`` /
``no`` (optionally followed by the reason), ``<minutes>m`` with the minutes the
runtime trusts for (``15m`` by default: trust this kind of call for a while) or
``always`` (save a rule; only where the prompt offers it); anything else is no
answer, and the prompt asks again. A question is answered by an option's number
or in the user's own words. Numbers are ASCII digits only: ``str.isdigit`` also
accepts ``"²"``, which :func:`int` rejects (:func:`number`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Verdict(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    TRUST_WHILE = "trust_while"  # Runtime.trust_for_a_while
    ALWAYS = "always"  # Runtime.trust_always


@dataclass(slots=True, frozen=True)
class ApprovalAnswer:
    verdict: Verdict
    reason: str | None = None


_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})


def number(text: str) -> int | None:
    """``text`` as a non-negative integer when it is ASCII digits; else ``None``."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_approval(text: str, minutes: int, *, can_always: bool = True) -> ApprovalAnswer | None:
    """The answer ``text`` gives an approval prompt; ``None`` when it is none of those offered."""
    word, _, rest = text.strip().partition(" ")
    word, reason = word.lower(), rest.strip() or None
    if word in _NO:
        return ApprovalAnswer(Verdict.REJECT, reason)
    if reason is not None:
        return None
    if word in _YES:
        return ApprovalAnswer(Verdict.APPROVE)
    if word == f"{minutes}m":
        return ApprovalAnswer(Verdict.TRUST_WHILE)
    if word == "always" and can_always:
        return ApprovalAnswer(Verdict.ALWAYS)
    return None


def option_chosen(text: str, options: int) -> int | None:
    """The option (0-based) a number typed in answer to a question picks; ``None``: own words."""
    chosen = number(text.strip())
    return chosen - 1 if chosen is not None and 1 <= chosen <= options else None


class CommandName(enum.StrEnum):
    NEW = "new"
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    APPROVALS = "approvals"
    CRON = "cron"
    ROLLBACK = "rollback"
    NOW = "now"
    AFTER = "after"
    CANCEL = "cancel"
    HELP = "help"
    EXIT = "exit"


_ALIASES = {"quit": CommandName.EXIT}


@dataclass(slots=True, frozen=True)
class Command:
    name: CommandName
    args: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class UnknownCommand:
    text: str


def parse_command(text: str) -> Command | UnknownCommand | None:
    """A ``/command`` line; ``None`` for anything else (a message, or an answer)."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    parts = stripped[1:].split()
    if not parts:
        return UnknownCommand(stripped)
    word, args = parts[0], parts[1:]
    name = _ALIASES.get(word.lower()) or next((c for c in CommandName if c.value == word.lower()), None)
    return UnknownCommand(stripped) if name is None else Command(name, tuple(args))
