"""Receive point R1: fold unread mail into the conversation at a round boundary.

Mail is consumed strictly in ``seq`` order. User, agent and scheduled mail
become user rows (each its own row; the context builder coalesces them);
approval decisions were applied when they were accepted and are just passed;
a pause stops consumption there. The user rows and the cursor move commit in
**one** transaction — that is the mailbox's exactly-once effect.
A stop is never consumed here: the session worker consumes it after the turn
has been cancelled, so it can count and drop what was still queued.
"""

from __future__ import annotations

import enum

from runtime.mailbox import ControlAction, ControlBody, Envelope, Mailbox, MailKind
from runtime.mailbox.envelope import AgentMessageBody, ScheduledTurnBody, UserMessageBody
from runtime.storage.db import Database, durable
from runtime.storage.history import HistoryStore


class Injected(enum.Enum):
    NOTHING = "nothing"
    MESSAGES = "messages"
    PAUSE = "pause"


def mail_text(envelope: Envelope) -> str | None:
    """The conversation text a piece of mail contributes, or ``None``."""
    body = envelope.body
    if isinstance(body, UserMessageBody):
        return body.text
    if isinstance(body, AgentMessageBody):
        return f"[mail {envelope.id} from {envelope.sender.kind} {envelope.sender.ref or ''}]\n{body.text}"
    if isinstance(body, ScheduledTurnBody):
        return body.text
    return None


def is_synthetic(envelope: Envelope) -> bool:
    body = envelope.body
    return isinstance(body, ScheduledTurnBody) or (isinstance(body, UserMessageBody) and body.is_synthetic)


def take_until_control(unread: list[Envelope]) -> tuple[list[Envelope], Envelope | None]:
    """The mail R1 may consume, and the control envelope that stops it (if any)."""
    taken: list[Envelope] = []
    for envelope in unread:
        if envelope.kind == MailKind.CONTROL:
            assert isinstance(envelope.body, ControlBody)
            if envelope.body.action in (ControlAction.STOP, ControlAction.PAUSE):
                return taken, envelope
            taken.append(envelope)  # resume / cancel_calls: nothing to do mid-turn
            continue
        taken.append(envelope)
    return taken, None


async def inject_mail(
    db: Database, mailbox: Mailbox, history: HistoryStore, session_id: int, turn_id: int
) -> Injected:
    unread = await mailbox.unread(session_id)
    taken, control = take_until_control(unread)
    pause = (
        control is not None
        and isinstance(control.body, ControlBody)
        and control.body.action == ControlAction.PAUSE
    )
    consumed = [*taken, control] if pause and control is not None else taken
    if not consumed:
        return Injected.NOTHING
    await durable(_commit(db, mailbox, history, session_id, turn_id, consumed))
    if pause:
        return Injected.PAUSE
    return Injected.MESSAGES if any(mail_text(e) is not None for e in taken) else Injected.NOTHING


async def _commit(
    db: Database, mailbox: Mailbox, history: HistoryStore, session_id: int, turn_id: int, mail: list[Envelope]
) -> None:
    async with db.write() as tx:
        for envelope in mail:
            text = mail_text(envelope)
            if text is None:
                continue
            history.add_user_row(
                tx,
                session_id=session_id,
                turn_id=turn_id,
                content=text,
                is_synthetic=is_synthetic(envelope),
                mail_seq=envelope.seq,
                meta=_meta(envelope),
            )
        await mailbox.advance(tx, session_id, max(e.seq for e in mail))


def _meta(envelope: Envelope) -> dict[str, object]:
    body = envelope.body
    meta: dict[str, object] = {"envelope_id": envelope.id}
    if isinstance(body, UserMessageBody):
        if body.attachments:
            meta["attachments"] = [a.model_dump(mode="json") for a in body.attachments]
        if body.chat_message_id is not None:
            meta["chat_message_id"] = body.chat_message_id
    return meta
