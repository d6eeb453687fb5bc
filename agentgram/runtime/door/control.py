"""Control mail from the user, as every door part that acts on a session builds it."""

from __future__ import annotations

from agentgram.runtime.core.mailbox import Envelope, Priority, Sender, SenderKind
from agentgram.runtime.core.mailbox.envelope import MailBody


def control_mail(session_id: int, body: MailBody, envelope_id: str) -> Envelope:
    """Control mail from the user: it goes ahead of the messages queued in the session."""
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER),
        priority=Priority.INTERRUPT,
        body=body,
    )
