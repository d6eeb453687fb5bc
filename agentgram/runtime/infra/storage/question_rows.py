"""The clarifying questions an agent asked (``ask_user_clarification``), one row each.

A row is bound to the tool call that asked it, so a turn resumed after a
restart finds its question (and the answer, if it came meanwhile) instead of
asking again. Its opaque ``id`` is what the chat adapter puts in button data;
``message_id`` is where the chat shows it, so a later process can edit it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column
from sqlmodel import Field, SQLModel

from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.types import StrEnumType, UTCDateTime


class QuestionRow(SQLModel, table=True):
    __tablename__ = "questions"

    id: str = Field(primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    tool_call_id: int = Field(index=True)  # the asking call's ``tool_calls.id`` (unique per question)
    question: str
    options: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    status: QuestionStatus = Field(
        default=QuestionStatus.PENDING, index=True, sa_type=StrEnumType(QuestionStatus)
    )
    answer: str | None = None
    chat_id: int | None = Field(default=None, sa_type=BigInteger)
    message_id: int | None = Field(default=None, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    settled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


__all__ = ["QuestionRow", "QuestionStatus"]
