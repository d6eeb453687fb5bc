"""The cluster's tables: the instances sharing one database, and the leases they hold.

:mod:`runtime.infra.cluster` owns what they mean (fenced leases, database time); this module
only declares them, below it, so the migration that creates them (revision 0009) needs nothing
from above storage. Importing it registers the tables on ``SQLModel.metadata``.

Every time in these rows is the **database's** clock (``now()`` on PostgreSQL,
``strftime('%Y-%m-%d %H:%M:%f', 'now')`` on SQLite), never a process's: instances on several
hosts compare each other's heartbeats, and only one clock is shared. So the time fields have no
Python default; the statements in :mod:`runtime.infra.cluster` write them, and the server
default (``CURRENT_TIMESTAMP``) covers a row inserted by hand.

Ids are ``BIGINT`` on PostgreSQL (a row per process start, for as long as the database lives) and
SQLite's ``INTEGER PRIMARY KEY`` (the rowid, the only column SQLite numbers by itself; 64 bits
there already).
"""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, text
from sqlmodel import Field, SQLModel

from agentgram.runtime.infra.storage.types import StrEnumType

ROW_ID = BigInteger().with_variant(Integer(), "sqlite")
"""A numbered primary key: ``bigserial`` on PostgreSQL, the rowid on SQLite."""


def database_now() -> dict[str, object]:
    """The column arguments of a time the database writes: ``DEFAULT CURRENT_TIMESTAMP`` (both
    backends spell it so)."""
    return {"server_default": text("CURRENT_TIMESTAMP")}


class LeaseKind(enum.StrEnum):
    """What a lease stands for; its ``key`` says which one."""

    SESSION = "session"
    """A session's ownership (key: the session id); unused: chats are owned whole (``chat``)."""
    CHAT = "chat"
    """A chat's ownership (key: the chat id): its sessions' workers, its outbox, its recovery
    (:mod:`runtime.infra.ownership`)."""
    POLLER = "poller"
    """The one instance that polls the chat platform (key 0)."""
    SCHEDULER = "scheduler"
    """The one instance that runs the scheduler (key 0)."""
    LEAD = "lead"
    """The cluster's leader (key 0): it runs the scheduler and, when polling, polls and runs every
    session (:mod:`runtime.infra.lead`)."""


class InstanceRow(SQLModel, table=True):
    """One process start of agentgram on this database."""

    __tablename__ = "instances"

    id: int | None = Field(default=None, primary_key=True, sa_type=ROW_ID)
    name: str
    host: str
    pid: int
    started_at: datetime = Field(sa_column_kwargs=database_now())
    heartbeat_at: datetime = Field(sa_column_kwargs=database_now())
    """The database's time of the last heartbeat; older than ``cluster.lease_ttl``: dead."""
    stopped_at: datetime | None = None
    """Set by a graceful stop (its leases are released in the same transaction)."""
    relay_url: str | None = None
    """Where the other instances reach this instance's webhook listener (webhook mode; revision
    0012): while it leads, a standby relays the updates the chat platform POSTs to it there."""


class LeaseRow(SQLModel, table=True):
    """Who holds one lease, and since which claim.

    ``instance_id`` is ``NULL`` once released: the row stays, so ``epoch`` keeps growing across
    holders and a fence once passed is never valid again."""

    __tablename__ = "leases"
    __table_args__ = (Index("ix_leases_instance", "instance_id"),)

    kind: LeaseKind = Field(primary_key=True, sa_type=StrEnumType(LeaseKind))
    key: int = Field(primary_key=True, sa_type=BigInteger, sa_column_kwargs={"autoincrement": False})
    instance_id: int | None = Field(default=None, foreign_key="instances.id", sa_type=ROW_ID)
    epoch: int = Field(sa_type=BigInteger)
    """Grows by one on every claim that changes the holder (the fencing token)."""
    claimed_at: datetime = Field(sa_column_kwargs=database_now())


__all__ = ["InstanceRow", "LeaseKind", "LeaseRow"]
