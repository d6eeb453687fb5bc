"""A session's working notes: its scratchpad entries and its todo list.

The scratchpad is one row per key (``update_scratchpad``); the todo list is
one row per session holding the whole list, as ``write_todos`` always
replaces it whole. Both belong to a session, so ``/new`` starts with neither.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.types import UTCDateTime


class ScratchpadRow(SQLModel, table=True):
    __tablename__ = "session_scratchpad"

    session_id: int = Field(foreign_key="sessions.id", primary_key=True)
    key: str = Field(primary_key=True)
    value: str
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class TodoListRow(SQLModel, table=True):
    __tablename__ = "session_todos"

    session_id: int = Field(foreign_key="sessions.id", primary_key=True)
    items: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    """``[{"text": …, "status": "pending" | "in_progress" | "done"}, …]`` in the model's order."""
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


__all__ = ["ScratchpadRow", "TodoListRow"]
