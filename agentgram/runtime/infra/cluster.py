"""Several agentgram processes on one PostgreSQL database: instances, heartbeats, fenced leases.

What this module owns, and why it is built so (docs/architecture/cluster.md says it at length):

* **An instance is one process start.** :meth:`InstanceRegistry.register` inserts its row
  (``instances``) and the process beats: :meth:`InstanceRegistry.beat` writes the heartbeat every
  ``cluster.heartbeat`` seconds. An instance whose heartbeat is older than ``cluster.lease_ttl``,
  or that stopped, is **dead**; whatever it held may be taken.
* **Database time, never a process's clock.** Every time is written and compared by the
  database (``now()`` on PostgreSQL, ``strftime(…, 'now')`` on SQLite): hosts' clocks drift
  apart, and a process paused by ``SIGSTOP`` or a long garbage collection does not notice that
  its own time went by. Only the age of a heartbeat *as the database sees it* decides.
* **A lease is a row** ``(kind, key) → (instance, epoch)`` (``leases``): a session's ownership
  (``session``, the session id), the one poller (``poller``, 0), the one scheduler leader
  (``scheduler``, 0). :meth:`Leases.claim` is one compare-and-set statement, ``INSERT … ON
  CONFLICT (kind, key) DO UPDATE … WHERE`` the holder is the claimant, or is stopped, or its
  heartbeat is older than the ttl, ``RETURNING epoch``: the database settles every race, and of
  any number of concurrent claimants exactly one gets the lease.
* **The epoch fences.** It grows by one on every claim that changes the holder (a release keeps
  the row with no holder, so it never goes back), and a holder's re-claim keeps it. A worker
  remembers the epoch it claimed and checks it with :meth:`Leases.holds` *inside the same
  transaction as each write it makes*; on PostgreSQL that check takes ``FOR SHARE`` on the lease
  row, so a takeover's claim (which locks the row to update it) waits for the write's commit, and
  a write after the takeover finds the new holder and fails. This is Kleppmann's fencing token
  ("How to do distributed locking"): a lease alone cannot stop a paused former holder from
  writing after it expired; the check in the write's own transaction does.
* **A takeover** is another instance's successful claim of a lease whose holder is dead. It
  costs the dead holder nothing it committed: what it wrote is in the database, and the new
  holder continues from there. What it had not committed is lost with it, and anything it tries
  to write after it wakes up (a ``SIGSTOP``-ed process ``SIGCONT``-ed past its ttl) fails the
  fence. An instance learns that it lapsed from :meth:`InstanceRegistry.beat` returning
  ``False``; its leases nobody took are still its own.
* **A graceful stop** (:meth:`InstanceRegistry.stop`) marks the instance stopped and releases
  every lease it holds in one transaction, so another instance claims them at once instead of
  after the ttl.

Both backends run these statements (SQLite ≥ 3.35 has ``ON CONFLICT … DO UPDATE … WHERE`` and
``RETURNING``), so they are tested on both; ``cluster.enabled`` itself needs PostgreSQL, because
several processes cannot share a SQLite file's one writer (:func:`runtime.config_check.check_cluster`).
"""

from __future__ import annotations

import asyncio
import enum
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.cluster_rows import InstanceRow, LeaseKind, LeaseRow
from agentgram.runtime.infra.storage.concurrency import insert_for
from agentgram.runtime.infra.storage.db import Database

log = get_logger("cluster")

_INSTANCES: sa.Table = InstanceRow.__table__  # type: ignore[attr-defined]
_LEASES: sa.Table = LeaseRow.__table__  # type: ignore[attr-defined]

SQLITE_CLOCK = "%Y-%m-%d %H:%M:%f"
"""SQLite's ``strftime`` format of the database's time (milliseconds; what SQLAlchemy reads back)."""

FORGET_AFTER = timedelta(days=7)
"""A dead instance's row is deleted at the next :meth:`InstanceRegistry.register` once it is
this old and holds no lease (a row per process start would otherwise only grow)."""


# --- the database's clock ------------------------------------------------------------------


def database_now(conn: Connection) -> sa.ColumnElement[Any]:
    """The database's current time, as the dialect spells it."""
    if conn.dialect.name == "sqlite":
        return sa.func.strftime(SQLITE_CLOCK, "now")
    return sa.func.now()


def database_ago(conn: Connection, seconds: float) -> sa.ColumnElement[Any]:
    """The database's time ``seconds`` ago."""
    if conn.dialect.name == "sqlite":
        return sa.func.strftime(SQLITE_CLOCK, "now", f"-{seconds:f} seconds")
    return sa.func.now() - sa.cast(sa.literal(timedelta(seconds=seconds)), sa.Interval())


def instance_alive(conn: Connection, ttl: float) -> sa.ColumnElement[bool]:
    """An ``instances`` row is live: not stopped, its heartbeat younger than ``ttl`` seconds in the
    database's time."""
    return sa.and_(_INSTANCES.c.stopped_at.is_(None), _INSTANCES.c.heartbeat_at >= database_ago(conn, ttl))


def holder_alive(conn: Connection, ttl: float) -> sa.ColumnElement[bool]:
    """A ``leases`` row's holder is a live instance (``False`` for a released lease).

    ``IN (SELECT id …)``, not a correlated ``EXISTS``: inside ``ON CONFLICT … DO UPDATE … WHERE``
    SQLAlchemy correlates nothing, and an ``EXISTS`` naming ``leases`` would scan the table anew
    (under PostgreSQL's statement snapshot, without the row the claim conflicted with)."""
    live_ids = sa.select(_INSTANCES.c.id).where(instance_alive(conn, ttl))
    return sa.and_(_LEASES.c.instance_id.is_not(None), _LEASES.c.instance_id.in_(live_ids))


def _connection(tx: Connection | Session) -> Connection:
    """The connection of a caller's transaction, whether it holds a Core connection or an ORM session."""
    return tx.connection() if isinstance(tx, Session) else tx


def _release_all(conn: Connection, instance_id: int) -> int:
    """Give up every lease ``instance_id`` holds (the rows stay, their epochs with them)."""
    result = conn.execute(
        sa.update(_LEASES).where(_LEASES.c.instance_id == instance_id).values(instance_id=None)
    )
    return int(result.rowcount)


# --- what crosses the module's boundary -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Instance:
    """One registered process (a row of ``instances``, as the database last saw it)."""

    id: int
    name: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    relay_url: str | None = None
    """Where the other instances reach its webhook listener (``None``: it polls, or is older)."""


def _instance(row: Any) -> Instance:
    return Instance(
        int(row.id), row.name, row.host, int(row.pid), row.started_at, row.heartbeat_at, row.relay_url
    )


@dataclass(frozen=True, slots=True)
class Lease:
    """Who holds one lease: the instance, the epoch of its claim, and whether it is live."""

    kind: LeaseKind
    key: int
    instance_id: int
    epoch: int
    claimed_at: datetime
    live: bool


class Liveness(enum.StrEnum):
    """What one heartbeat found (:meth:`InstanceRegistry.beat`)."""

    LIVE = "live"
    """The previous heartbeat was younger than the ttl: nobody could have taken a lease."""
    LAPSED = "lapsed"
    """It was older (the process was paused, the database out of reach): another instance may
    have taken some leases; the fence refuses their former holder's writes. Beating again."""
    GONE = "gone"
    """The instance stopped (or its row is gone): no more heartbeats."""


# --- instances -----------------------------------------------------------------------------


class InstanceRegistry:
    """This process's row in ``instances``: registered at start, beaten while it runs, stopped at the end.

    ``ttl`` is ``cluster.lease_ttl``: the age past which a heartbeat means a dead instance.
    """

    def __init__(self, db: Database, name: str, host: str, pid: int, *, ttl: float = 10.0) -> None:
        self.db = db
        self.name = name
        self.host = host
        self.pid = pid
        self.ttl = ttl
        self.relay_url: str | None = None
        """Where the other instances reach this one's webhook listener (registered with the row)."""
        self.beaten_at: float | None = None
        """``time.monotonic()`` of the last heartbeat written (or of the registration)."""
        self._id: int | None = None

    @classmethod
    def of_this_process(cls, db: Database, settings: ClusterSettings) -> InstanceRegistry:
        """The registry of the running process, named by ``cluster.instance_name`` (or ``<host>-<pid>``)."""
        return cls(db, settings.name(), socket.gethostname(), os.getpid(), ttl=settings.lease_ttl)

    @property
    def id(self) -> int:
        """This instance's id; only after :meth:`register`."""
        if self._id is None:
            raise RuntimeError("the instance is not registered yet")
        return self._id

    async def register(self) -> int:
        """Insert this instance's row (started and beaten now, in the database's time); its id.

        Dead instances' rows older than :data:`FORGET_AFTER` that hold no lease are deleted."""

        def insert(conn: Connection) -> int:
            now = database_now(conn)
            statement = (
                sa.insert(_INSTANCES)
                .values(
                    name=self.name,
                    host=self.host,
                    pid=self.pid,
                    started_at=now,
                    heartbeat_at=now,
                    relay_url=self.relay_url,
                )
                .returning(_INSTANCES.c.id)
            )
            instance_id = int(conn.execute(statement).scalar_one())
            holding = sa.exists().where(_LEASES.c.instance_id == _INSTANCES.c.id)
            conn.execute(
                sa.delete(_INSTANCES).where(
                    _INSTANCES.c.heartbeat_at < database_ago(conn, FORGET_AFTER.total_seconds()),
                    ~holding,
                )
            )
            return instance_id

        self._id = await self.db.write_sync(insert)
        self.beaten_at = time.monotonic()
        log.info("instance %s registered as %d (%s, pid %d)", self.name, self._id, self.host, self.pid)
        return self._id

    async def beat(self) -> bool:
        """Write the heartbeat (the database's now); whether the instance was live all along
        (:attr:`Liveness.LIVE`). A lapsed instance beats again; a stopped one does not."""
        return await self.check() is Liveness.LIVE

    async def check(self) -> Liveness:
        """:meth:`beat`, saying what it found."""
        instance_id = self.id

        def beat(conn: Connection) -> Liveness:
            fresh = instance_alive(conn, self.ttl)
            row = conn.execute(
                sa.select(_INSTANCES.c.stopped_at.is_(None), fresh).where(_INSTANCES.c.id == instance_id)
            ).first()
            if row is None or not row[0]:
                return Liveness.GONE
            conn.execute(
                sa.update(_INSTANCES)
                .where(_INSTANCES.c.id == instance_id)
                .values(heartbeat_at=database_now(conn))
            )
            return Liveness.LIVE if row[1] else Liveness.LAPSED

        return await self.db.write_sync(beat)

    async def run_heartbeat(
        self, interval: float, *, on_lapse: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        """Beat every ``interval`` seconds until the instance stops (or the task is cancelled).

        Run as a task its owner cancels on shutdown. A database out of reach is logged and tried
        again at the next beat; a lapse is logged once, when it happens, and ``on_lapse`` asked
        whether to go on beating (a leader checks its lead: ``runtime.infra.lead``)."""
        state = Liveness.LIVE
        while state is not Liveness.GONE:
            await asyncio.sleep(interval)
            try:
                found = await self.check()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("instance %s: heartbeat failed (%s: %s)", self.name, type(exc).__name__, exc)
                continue
            if found is not Liveness.GONE:
                self.beaten_at = time.monotonic()
            if found is Liveness.LAPSED:
                log.warning(
                    "instance %s: heartbeat older than %gs: others may have taken its leases",
                    self.name,
                    self.ttl,
                )
                if on_lapse is not None and not await on_lapse():
                    return
            state = found
        log.info("instance %s stopped: no more heartbeats", self.name)

    def heartbeat_fresh(self) -> bool:
        """The last heartbeat was written less than the ttl ago (by this process's clock: it
        asks whether *it* kept beating, not what others see)."""
        return self.beaten_at is not None and time.monotonic() - self.beaten_at < self.ttl

    async def stop(self) -> int:
        """Mark the instance stopped and release every lease it holds, in one transaction (another
        instance claims them at once); how many leases it released."""
        instance_id = self.id

        def stop(conn: Connection) -> int:
            conn.execute(
                sa.update(_INSTANCES)
                .where(_INSTANCES.c.id == instance_id, _INSTANCES.c.stopped_at.is_(None))
                .values(stopped_at=database_now(conn))
            )
            return _release_all(conn, instance_id)

        released = await self.db.write_sync(stop)
        log.info("instance %s stopped; %d lease(s) released", self.name, released)
        return released

    async def live(self) -> list[Instance]:
        """The instances whose heartbeat is younger than the ttl and that did not stop, by id."""

        def read(session: Session) -> list[Instance]:
            conn = session.connection()
            rows = conn.execute(
                sa.select(_INSTANCES).where(instance_alive(conn, self.ttl)).order_by(_INSTANCES.c.id)
            ).all()
            return [_instance(row) for row in rows]

        return await self.db.read_sync(read)


# --- leases --------------------------------------------------------------------------------


class Leases:
    """The leases one instance claims, checks and releases (module docstring: fenced leases)."""

    def __init__(self, db: Database, instance_id: int, ttl: float) -> None:
        self.db = db
        self.instance_id = instance_id
        self.ttl = ttl

    def _claim_statement(self, conn: Connection, kind: LeaseKind, key: int) -> sa.Executable:
        statement = insert_for(conn, _LEASES).values(
            kind=kind, key=key, instance_id=self.instance_id, epoch=1, claimed_at=database_now(conn)
        )
        excluded = statement.excluded
        mine = _LEASES.c.instance_id == excluded.instance_id  # NULL (released) is nobody's
        return statement.on_conflict_do_update(
            index_elements=[_LEASES.c.kind, _LEASES.c.key],
            set_={
                "instance_id": excluded.instance_id,
                "epoch": sa.case((mine, _LEASES.c.epoch), else_=_LEASES.c.epoch + 1),
                "claimed_at": sa.case((mine, _LEASES.c.claimed_at), else_=excluded.claimed_at),
            },
            where=sa.or_(mine, ~holder_alive(conn, self.ttl)),
        ).returning(_LEASES.c.epoch)

    async def claim(self, kind: LeaseKind, key: int) -> int | None:
        """Take the lease if it is free, already this instance's, or held by a dead instance: its
        epoch (grown by one if the holder changed). ``None`` while a live instance holds it.

        One statement (module docstring): of concurrent claimants exactly one wins."""

        def claim(conn: Connection) -> int | None:
            epoch = conn.execute(self._claim_statement(conn, kind, key)).scalar_one_or_none()
            return None if epoch is None else int(epoch)

        return await self.db.write_sync(claim)

    def holds(self, tx: Connection | Session, kind: LeaseKind, key: int, epoch: int) -> bool:
        """Whether this instance still holds the lease at ``epoch``: the fence, checked inside the
        caller's write transaction (a Core connection or an ORM session) before its writes.

        On PostgreSQL it takes ``FOR SHARE`` on the lease row until the caller commits, so a
        takeover's claim waits for this transaction, and a check after a takeover is ``False``.
        From an ``AsyncSession``: ``await session.run_sync(lambda s: leases.holds(s, …))``."""
        conn = _connection(tx)
        statement = sa.select(_LEASES.c.epoch).where(
            _LEASES.c.kind == kind,
            _LEASES.c.key == key,
            _LEASES.c.instance_id == self.instance_id,
            _LEASES.c.epoch == epoch,
        )
        if conn.dialect.name == "postgresql":
            statement = statement.with_for_update(read=True)
        return conn.execute(statement).first() is not None

    async def release(self, kind: LeaseKind, key: int) -> bool:
        """Give the lease up if this instance holds it (the row and its epoch stay); whether it did."""

        def release(conn: Connection) -> bool:
            result = conn.execute(
                sa.update(_LEASES)
                .where(
                    _LEASES.c.kind == kind, _LEASES.c.key == key, _LEASES.c.instance_id == self.instance_id
                )
                .values(instance_id=None)
            )
            return bool(result.rowcount)

        return await self.db.write_sync(release)

    async def release_all(self) -> int:
        """Give up every lease this instance holds; how many."""
        return await self.db.write_sync(lambda conn: _release_all(conn, self.instance_id))

    async def holder(self, kind: LeaseKind, key: int) -> Lease | None:
        """Who holds the lease, live or dead; ``None`` when nobody does (never claimed, or released)."""

        def read(session: Session) -> Lease | None:
            conn = session.connection()
            live = holder_alive(conn, self.ttl).label("live")
            row = conn.execute(
                sa.select(_LEASES, live).where(
                    _LEASES.c.kind == kind, _LEASES.c.key == key, _LEASES.c.instance_id.is_not(None)
                )
            ).first()
            if row is None:
                return None
            found = row._mapping
            return Lease(
                LeaseKind(found["kind"]),
                int(found["key"]),
                int(found["instance_id"]),
                int(found["epoch"]),
                found["claimed_at"],
                bool(found["live"]),
            )

        return await self.db.read_sync(read)

    async def live_holder(self, kind: LeaseKind, key: int) -> Instance | None:
        """The live instance that holds the lease, as its row reads now; ``None`` when nobody
        live does (never claimed, released, or its holder dead)."""

        def read(session: Session) -> Instance | None:
            conn = session.connection()
            row = conn.execute(
                sa.select(_INSTANCES)
                .join(_LEASES, _LEASES.c.instance_id == _INSTANCES.c.id)
                .where(
                    _LEASES.c.kind == kind,
                    _LEASES.c.key == key,
                    instance_alive(conn, self.ttl),
                )
            ).first()
            return None if row is None else _instance(row)

        return await self.db.read_sync(read)

    async def expired(self, kind: LeaseKind) -> list[int]:
        """The keys of ``kind`` nobody live holds (released, or held by a stopped or expired
        instance), in key order: what a takeover scan may claim."""

        def read(session: Session) -> list[int]:
            conn = session.connection()
            rows = conn.execute(
                sa.select(_LEASES.c.key)
                .where(_LEASES.c.kind == kind, ~holder_alive(conn, self.ttl))
                .order_by(_LEASES.c.key)
            ).scalars()
            return [int(key) for key in rows]

        return await self.db.read_sync(read)


__all__ = [
    "FORGET_AFTER",
    "Instance",
    "InstanceRegistry",
    "Lease",
    "LeaseKind",
    "Leases",
    "Liveness",
    "database_ago",
    "database_now",
]
