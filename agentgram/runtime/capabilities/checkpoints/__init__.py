"""File checkpoints per turn and ``/rollback`` (issue 30): :mod:`.store` keeps them on disk,
:mod:`.service` decides when they are taken and how a rollback runs."""

from agentgram.runtime.capabilities.checkpoints.service import (
    LISTED_TURNS,
    ChangedTurn,
    Checkpoints,
    FileSummary,
    RollbackOutcome,
    RollbackPreview,
    RollbackStatus,
    Tell,
    TurnCheckpoints,
)
from agentgram.runtime.capabilities.checkpoints.store import Store, store_root

__all__ = [
    "LISTED_TURNS",
    "ChangedTurn",
    "Checkpoints",
    "FileSummary",
    "RollbackOutcome",
    "RollbackPreview",
    "RollbackStatus",
    "Store",
    "Tell",
    "TurnCheckpoints",
    "store_root",
]
