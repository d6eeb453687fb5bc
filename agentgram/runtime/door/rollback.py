"""The rollback part of the door (``rt.rollback``): the turns of a session that changed files,
what undoing one would undo, and the undo itself (issue 30; the rules are
:mod:`runtime.capabilities.checkpoints.service`'s).

A turn is named by its id; every call checks that it is one of the session's, so a button from
another chat, or one pressed after its turn was rolled back or pruned, finds nothing."""

from __future__ import annotations

from agentgram.runtime.capabilities.checkpoints import (
    ChangedTurn,
    Checkpoints,
    RollbackOutcome,
    RollbackPreview,
)
from agentgram.runtime.door.values import SessionRef


class Rollback:
    def __init__(self, *, checkpoints: Checkpoints) -> None:
        self.checkpoints = checkpoints

    async def changed_turns(self, session: SessionRef) -> list[ChangedTurn]:
        """The session's newest turns that changed files and can be rolled back, newest first."""
        return await self.checkpoints.changed_turns(session.id)

    async def rollback_preview(self, session: SessionRef, turn_id: int) -> RollbackPreview | None:
        """What undoing the turn would undo (it and the session's later turns that changed
        files); ``None`` when it is not one of the session's that can be rolled back."""
        return await self.checkpoints.preview(session.id, turn_id)

    async def roll_back(self, session: SessionRef, turn_id: int, *, confirm: str = "") -> RollbackOutcome:
        """Undo the turn and the later ones; ``confirm``: the token of a ``changed_since`` answer
        the user agreed to (the files it named are then overwritten)."""
        return await self.checkpoints.undo(session.id, turn_id, confirm=confirm)
