"""Each recently read session's unread mail, in memory (rules in :mod:`runtime.storage.views`).

:class:`~runtime.mailbox.mailbox.SqlMailbox` updates it after every accept and
cursor move commits, so the consumer it wakes reads its mail without a query.
"""

from __future__ import annotations

from agentgram.runtime.core.mailbox.envelope import Envelope
from agentgram.runtime.infra.storage.models import Steer
from agentgram.runtime.infra.storage.views import SessionViews


class UnreadView(SessionViews[list[Envelope]]):
    """Each cached session's unread mail in ``seq`` order, kept in step with commits."""

    def accepted(self, envelopes: list[Envelope]) -> None:
        for envelope in envelopes:
            unread = self.changed(envelope.session_id)
            if unread is not None and (not unread or unread[-1].seq < envelope.seq):
                unread.append(envelope)

    def steered(self, session_id: int, seq: int, choice: Steer) -> None:
        unread = self.changed(session_id)
        if unread is not None:
            unread[:] = [e.model_copy(update={"steer": choice}) if e.seq == seq else e for e in unread]

    def advanced(self, session_id: int, upto: int) -> None:
        unread = self.changed(session_id)
        if unread is not None:
            unread[:] = [e for e in unread if e.seq > upto]
