"""Column types: every datetime column of every table is the one UTC type, every status or
kind column is its ``StrEnum``; both read back typed and are stored as plain text.

The tests walk ``SQLModel.metadata``, so a table added later cannot forget either."""

from __future__ import annotations

import enum
import sqlite3
import types
import typing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Column, DateTime, String, Table
from sqlalchemy.exc import StatementError
from sqlalchemy.types import TypeDecorator, TypeEngine
from sqlmodel import SQLModel

import agentgram.runtime.infra.storage.migrations  # noqa: F401  (registers every table)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource, Turn, TurnStatus
from agentgram.runtime.infra.storage.types import StrEnumType, UTCDateTime

NOT_ENUMS = {
    ("dead_letters", "source"): "the adapter that could not parse the input, not a session source",
    ("approval_rules", "source"): "a rule's source as configured, aliases included",
    ("approval_rules", "action"): "an approvals Action: that package is above storage",
}
"""Columns named like a status or kind that hold something else, and why."""

STATUS_LIKE = {"status", "kind", "role", "source", "priority", "sender_kind", "approvals", "action"}


def _columns() -> list[tuple[Table, Column[typing.Any]]]:
    return [(table, column) for table in SQLModel.metadata.sorted_tables for column in table.columns]


def _stored_as(kind: TypeEngine[typing.Any]) -> TypeEngine[typing.Any]:
    """The database type under a decorator."""
    return kind.impl_instance if isinstance(kind, TypeDecorator) else kind


def _models() -> dict[str, type[SQLModel]]:
    mappers = SQLModel._sa_registry.mappers  # type: ignore[attr-defined]
    return {mapper.local_table.name: mapper.class_ for mapper in mappers}


def _enum_of(annotation: object) -> type[enum.StrEnum] | None:
    """The ``StrEnum`` a field is annotated with, ``X | None`` unwrapped."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = inner[0] if len(inner) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, enum.StrEnum):
        return annotation
    return None


def test_the_metadata_holds_the_tables_of_core_mail_outbox_and_scheduler() -> None:
    names = set(SQLModel.metadata.tables)
    assert {"sessions", "turns", "session_mail", "outbox", "scheduled_jobs", "tic_runs", "kv_state"} <= names


def test_every_datetime_column_of_every_table_is_utc_aware() -> None:
    datetimes = [(t.name, c.name, c.type) for t, c in _columns() if isinstance(_stored_as(c.type), DateTime)]
    assert len(datetimes) > 20
    naive = [(table, column) for table, column, kind in datetimes if not isinstance(kind, UTCDateTime)]
    assert naive == []


def test_every_enum_field_is_stored_through_its_enum() -> None:
    checked = 0
    for name, model in _models().items():
        hints = typing.get_type_hints(model)
        for column in SQLModel.metadata.tables[name].columns:
            expected = _enum_of(hints.get(column.key))
            if expected is None:
                continue
            assert isinstance(column.type, StrEnumType), (name, column.key)
            assert column.type.enum_class is expected, (name, column.key)
            checked += 1
    assert checked >= 14


def test_every_status_or_kind_column_is_typed_by_an_enum() -> None:
    plain = [
        (t.name, c.name)
        for t, c in _columns()
        if c.name in STATUS_LIKE and isinstance(c.type, String) and (t.name, c.name) not in NOT_ENUMS
    ]
    assert plain == []


@pytest.fixture
async def db(tmp_path: Path) -> typing.AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    await migrate(database)
    yield database
    await database.close()


async def test_statuses_and_datetimes_read_back_typed_and_are_stored_as_plain_text(
    db: Database, tmp_path: Path
) -> None:
    noon_in_berlin = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=1)))
    async with db.write() as tx:
        tx.add(ChatSession(source=SessionSource.CHAT, chat_id=7, created_at=noon_in_berlin))
    async with db.write() as tx:
        tx.add(Turn(session_id=1, status=TurnStatus.PAUSED))

    async with db.read() as tx:
        session, turn = await tx.get(ChatSession, 1), await tx.get(Turn, 1)
    assert session is not None and turn is not None
    assert type(session.source) is SessionSource and session.source == SessionSource.CHAT
    assert type(turn.status) is TurnStatus and turn.status == TurnStatus.PAUSED
    assert session.created_at == noon_in_berlin and session.created_at.tzinfo == UTC

    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("SELECT source, created_at FROM sessions").fetchall() == [
        ("chat", "2026-03-01 11:00:00.000000")
    ]
    assert raw.execute("SELECT status FROM turns").fetchall() == [("paused",)]


async def test_a_naive_datetime_or_an_unknown_status_is_refused(db: Database) -> None:
    with pytest.raises(StatementError, match="timezone"):
        async with db.write() as tx:
            tx.add(ChatSession(source=SessionSource.CHAT, chat_id=7, created_at=datetime(2026, 1, 1)))
    with pytest.raises(StatementError, match="'telegram' is not a valid SessionSource"):
        async with db.write() as tx:
            tx.add(ChatSession(source="telegram", chat_id=7))  # type: ignore[arg-type]
