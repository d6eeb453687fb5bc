"""The one codec for inline-button data: typed actions ↔ opaque ≤ 64-byte strings.

Button data only ever names an action and an opaque id the database knows
(an approval request id, a job id, a rule id); nothing in it is trusted.
Garbage decodes to ``None`` and is answered politely.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from agentgram.bot.telegram.core.port import KeyButton

MAX_BYTES = 64
_PREFIX = "ag1"
_ARG = re.compile(r"[A-Za-z0-9_\-]{1,40}")


class ButtonAction(enum.StrEnum):
    APPROVE = "ap"
    REJECT = "rj"
    TRUST_15 = "t15"
    ALWAYS = "al"
    ALWAYS_CONFIRM = "alc"
    ALWAYS_CANCEL = "alx"
    REVOKE_BYPASS = "rvb"
    REVOKE_RULE = "rvr"
    CRON_RUN = "cr"
    CRON_PAUSE = "cp"
    CRON_RESUME = "cu"
    CRON_DELETE = "cd"
    CRON_DELETE_CONFIRM = "cdc"
    CRON_DELETE_CANCEL = "cdx"
    PAIR_APPROVE = "pa"
    PAIR_DENY = "pd"
    MODEL_PICK = "mdl"  # arg: the model's name (llm.models names fit the codec)
    QUESTION_ANSWER = "qa"  # arg: "<question id>_<option index>"
    OPEN_EXCHANGE = "sx"  # arg: a chat_history row id a /search hit shows
    CALL_CANCEL = "cc"  # arg: a tracked call's run id (its live status line, /jobs)
    SPAWNED_OPEN = "spo"  # arg: a spawned session's id (its /sessions card): its last answer again
    SPAWNED_STOP = "sps"  # arg: a spawned session's id: stop what it does
    SPAWNED_CLOSE = "spc"  # arg: a spawned session's id: stop it and end it
    ROLLBACK_PICK = "rbp"  # arg: a turn id /rollback lists: what undoing it would undo
    ROLLBACK_UNDO = "rbu"  # arg: "<turn id>" or "<turn id>_<token>" (files changed since, confirmed)
    ROLLBACK_CANCEL = "rbx"  # arg: the turn id
    QUEUED_NOW = "qn"  # arg: "<session id>_<mail seq>" of a message queued behind a turn
    QUEUED_AFTER = "qf"  # arg: the same
    QUEUED_CANCEL = "qx"  # arg: the same


@dataclass(slots=True, frozen=True)
class Button:
    action: ButtonAction
    arg: str


def encode(button: Button) -> str:
    if not _ARG.fullmatch(button.arg):
        raise ValueError(f"button argument {button.arg!r} is not opaque-safe")
    data = f"{_PREFIX}:{button.action.value}:{button.arg}"
    if len(data.encode()) > MAX_BYTES:
        raise ValueError("button data over 64 bytes")
    return data


def key_button(label: str, action: ButtonAction, arg: str) -> KeyButton:
    """An inline button labelled ``label`` whose press is ``action`` on ``arg``."""
    return KeyButton(label, callback_data=encode(Button(action, arg)))


def decode(data: object) -> Button | None:
    if not isinstance(data, str) or not data or len(data.encode()) > MAX_BYTES:  # untyped input
        return None
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != _PREFIX or not _ARG.fullmatch(parts[2]):
        return None
    try:
        action = ButtonAction(parts[1])
    except ValueError:
        return None
    return Button(action, parts[2])
