"""The round-boundary receive point (docs/architecture/mailbox.md): fold unread mail into the conversation at a round boundary.

Mail is consumed strictly in ``seq`` order. User, agent, scheduled and
tool-result mail (a detached call that ended, :mod:`runtime.turn.background`)
become user rows (each its own row; the context builder coalesces them);
approval decisions were applied when they were accepted and are just passed;
a pause stops consumption there, unless a later resume cancels it out. The
user rows and the cursor move commit in **one** transaction — that is the
mailbox's exactly-once effect.

A stop is never consumed here, and while one is unread nothing is: the turn
ends cancelled and the session worker consumes the stop afterwards, counting
and dropping what was still queued (never stored as conversation).

**Steered messages** (issue 30: the user's ⚡ / ⏭ / 🗑 on a message queued behind a running turn,
``Envelope.steer``): one marked ``now`` ends the turn here like a stop, but nothing is dropped —
the worker starts the next turn with it; one marked ``after`` is not folded into the running turn,
and neither is what came after it (mail is read in ``seq`` order): the next turn starts with
them; one marked ``cancel`` is read as nothing, here and when a turn opens.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from agentgram.runtime.capabilities.attachments.inbox import PreparationStopped, spoken_text
from agentgram.runtime.core.mailbox import ControlAction, ControlBody, Envelope, MailKind, Steer
from agentgram.runtime.core.mailbox.envelope import (
    AgentMessageBody,
    ScheduledTurnBody,
    ToolCallFinishedBody,
    UserMessageBody,
)
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.ports import Transactions, TurnHistory, TurnMail
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.db import durable

Prepared = Mapping[str, list[dict[str, Any]]]
"""A message's attachments as the inbox prepared them, by envelope id (``runtime.attachments``)."""
Prepare = Callable[[list[Envelope]], Awaitable[Prepared]]


async def no_files(mail: list[Envelope]) -> Prepared:
    """The :data:`Prepare` of a caller with no inbox: every message as it came, no file fetched."""
    return {}


class Injected(enum.Enum):
    NOTHING = "nothing"
    MESSAGES = "messages"
    PAUSE = "pause"
    STOP = "stop"


@dataclass(slots=True, frozen=True)
class Folded:
    """What a receive point did, and the mail it folded into the conversation."""

    injected: Injected
    mail: tuple[Envelope, ...] = ()


def mail_text(envelope: Envelope, *, read: bool = False) -> str | None:
    """The conversation text a piece of mail contributes, or ``None``.

    A detached call's result reads as a one-line notice when the model already ``read`` it
    through a tool (docs/architecture/tools.md, "Read once")."""
    body = envelope.body
    if envelope.steer is Steer.CANCEL:  # the user dropped it before it was read
        return None
    if isinstance(body, UserMessageBody):
        return body.text
    if isinstance(body, AgentMessageBody):
        return f"[mail {envelope.id} from {envelope.sender.kind} {envelope.sender.ref or ''}]\n{body.text}"
    if isinstance(body, ScheduledTurnBody):
        return body.text
    if isinstance(body, ToolCallFinishedBody):
        return texts.finished_mail(envelope.id, body.call_id, body.name, body.status, body.result, read=read)
    return None


ALL_WAKE: frozenset[str] = frozenset({"user", "tool", "parent", "child", "peer"})


def wakes(envelope: Envelope, wake_on: frozenset[str] = ALL_WAKE) -> bool:
    """Whether this mail starts a turn in an idle session (mail that does not waits for one that
    does). ``wake_on``: the session agent's list of whose mail wakes it (``runtime.core.peers``):
    a user's message (``user``), a detached call's end (``tool``), a session's mail by how its
    sender stands to this one (``parent``, ``child``, ``peer``). A scheduled run (its own headless
    session) and a spawned session's task always wake: a session that never starts could never
    read mail."""
    body = envelope.body
    if envelope.steer is Steer.CANCEL:
        return False
    if isinstance(body, ToolCallFinishedBody):
        return body.wakes and "tool" in wake_on
    if isinstance(body, AgentMessageBody):
        return body.task or body.relation in wake_on
    if isinstance(body, UserMessageBody):
        return "user" in wake_on or body.is_synthetic
    return mail_text(envelope) is not None


def is_users(envelope: Envelope) -> bool:
    """A message a person sent (not one the system made for them)."""
    body = envelope.body
    return isinstance(body, UserMessageBody) and not body.is_synthetic


def is_synthetic(envelope: Envelope) -> bool:
    body = envelope.body
    if isinstance(body, ToolCallFinishedBody):
        return True
    return isinstance(body, ScheduledTurnBody) or (isinstance(body, UserMessageBody) and body.is_synthetic)


def control_action(envelope: Envelope) -> ControlAction | None:
    if envelope.kind == MailKind.CONTROL and isinstance(envelope.body, ControlBody):
        return envelope.body.action
    return None


def stop_pending(unread: list[Envelope]) -> bool:
    """A stop, or a message the user chose to start on now, waits: the running turn ends here."""
    return any(control_action(e) == ControlAction.STOP or e.steer is Steer.NOW for e in unread)


def before_held(mail: list[Envelope]) -> list[Envelope]:
    """``mail`` up to the first message held for the next turn (``after``), which waits with
    everything after it."""
    for index, envelope in enumerate(mail):
        if envelope.steer is Steer.AFTER:
            return mail[:index]
    return mail


def take_until_pause(unread: list[Envelope]) -> tuple[list[Envelope], bool]:
    """The mail this receive point consumes now, and whether it ends in a pause that holds.

    A pause followed by a resume (``/pause`` then ``/resume`` before the next
    step) cancels out: both are consumed and the turn goes on.
    """
    for index, envelope in enumerate(unread):
        if control_action(envelope) != ControlAction.PAUSE:
            continue
        later = [control_action(e) for e in unread[index + 1 :]]
        if ControlAction.RESUME in later:
            continue
        return unread[: index + 1], True
    return list(unread), False


async def inject_mail(
    db: Transactions,
    mailbox: TurnMail,
    history: TurnHistory,
    session_id: int,
    turn_id: int,
    unread: list[Envelope] | None = None,
    *,
    prepare: Prepare = no_files,
) -> Folded:
    """``unread`` may be handed in when the caller has just read it (saves a query); ``prepare``
    fetches the files of the messages folded in (``runtime.attachments``) before they are."""
    if unread is None:
        unread = await mailbox.unread(session_id)
    if stop_pending(unread):
        return Folded(Injected.STOP)
    paused, pause = take_until_pause(unread)
    taken = before_held(paused)
    pause = pause and len(taken) == len(paused)  # a pause behind held mail is not reached yet
    if not taken:
        return Folded(Injected.NOTHING)
    try:
        prepared = await prepare(taken)
    except PreparationStopped:  # a /stop is on its way
        return Folded(Injected.STOP)
    await durable(_commit(db, mailbox, history, session_id, turn_id, taken, prepared))
    read = tuple(e for e in taken if mail_text(e) is not None)
    if pause:
        return Folded(Injected.PAUSE, read)
    return Folded(Injected.MESSAGES if read else Injected.NOTHING, read)


async def _commit(
    db: Transactions,
    mailbox: TurnMail,
    history: TurnHistory,
    session_id: int,
    turn_id: int,
    mail: list[Envelope],
    prepared: Prepared,
) -> None:
    await db.write_sync(lambda tx: fold_into_turn(tx, mailbox, history, session_id, turn_id, mail, prepared))


def fold_into_turn(
    tx: Connection,
    mailbox: TurnMail,
    history: TurnHistory,
    session_id: int,
    turn_id: int,
    mail: list[Envelope],
    prepared: Prepared | None = None,
) -> None:
    """Inside the caller's (synchronous) transaction: each piece of mail its own user row, then the
    cursor. ``prepared``: the attachments of the messages that have any, as the inbox left them."""
    if not mail:
        return
    prepared = prepared or {}
    finished = [e.body.call_id for e in mail if isinstance(e.body, ToolCallFinishedBody)]
    read = BackgroundStore.read_in(tx, session_id, finished) if finished else set()
    for envelope in mail:
        body = envelope.body
        text = mail_text(envelope, read=isinstance(body, ToolCallFinishedBody) and body.call_id in read)
        if text is None:
            continue
        files = prepared.get(envelope.id)
        history.add_user_row(
            tx,
            session_id=session_id,
            turn_id=turn_id,
            content=spoken_text(text, files) if files else text,
            is_synthetic=is_synthetic(envelope),
            mail_seq=envelope.seq,
            meta=_meta(envelope, files),
        )
    mailbox.advance(tx, session_id, max(e.seq for e in mail))


def _meta(envelope: Envelope, files: list[dict[str, Any]] | None) -> dict[str, object]:
    body = envelope.body
    meta: dict[str, object] = {"envelope_id": envelope.id}
    if isinstance(body, UserMessageBody):
        if files is not None:
            meta["attachments"] = files
        elif body.attachments:
            meta["attachments"] = [a.model_dump(mode="json") for a in body.attachments]
        if body.chat_message_id is not None:
            meta["chat_message_id"] = body.chat_message_id
    return meta
