"""One send budget for a cluster's instances: token buckets and pauses kept in the database.

A chat platform's rate limits belong to the bot, not to a process: with ``cluster.enabled``
several instances send for one bot, and each pacing itself alone would let the platform see
their sum. So the budget lives in the shared database (``send_budget``,
:mod:`.storage.budget_rows`), one row per key: ``global`` (:data:`GLOBAL`) and one per chat
(:func:`chat_key`). The adapter says what a send takes (the chat's key and each :class:`Rate`);
this module knows no platform.

* **A token bucket per key, reserved in the database's time.** A send takes a token of the
  bot's overall budget and, when it goes to a chat, one of that chat's. :meth:`SendBudget.take`
  is one statement: it locks the send's rows (in key order, so takers never deadlock) and
  reserves both tokens for **one time**, the overall bucket's earliest (or now), which is when
  the send goes out, provided the chat's bucket or a pause of the chat does not hold the send
  back past it. If it does, nothing is reserved: the take says how long until the chat allows a
  send, and the sender waits and takes again (:meth:`SendBudget.acquire`). Both halves matter: a
  chat's token reserved for a send the overall bucket then held back would let that chat's sends
  bunch up when they finally go; and an overall token reserved for a later time a chat chose
  would leave a hole every other chat waits behind (a bucket's reservations only move forward).
  The bucket is GCRA's form (a *theoretical arrival time* per key,
  :class:`~.storage.budget_rows.SendBudgetRow`): any window of ``w`` seconds holds at most
  ``burst + rate * w`` sends of a key, whichever instances reserved them.
* **Database time.** Now is the database's clock (``clock_timestamp()`` on PostgreSQL, read
  after the rows are locked), never a process's. The process waits for a reserved time on its
  own monotonic clock, placed by the tightest bound recent answers gave on the two clocks'
  offset (:class:`_DatabaseClock`): hosts' clocks never meet, a send goes late rather than
  early, and a take answered late (behind a queue at the overall row, or by a busy event loop)
  still sends on time. A sender that wakes well after its time (a stalled event loop, a paused
  process) gives the reservation up and takes again (:data:`LATE`): going late, it would bunch
  up with the sends reserved after it.
* **Shared pauses.** :meth:`SendBudget.pause` records that a key may not send for a while (the
  platform's "retry after"); every instance's take honours it, and :meth:`SendBudget.paused_for`
  reads it for sends that take no token. Reads are cached for :data:`PAUSE_CACHE` seconds, so a
  busy chat costs one read per fifth of a second at most.
* **Round trips.** On PostgreSQL each statement runs alone in autocommit, outside the runtime's
  fenced write transactions: a token is not a write a former leader could corrupt anything with,
  and a send should cost one statement, not four (a transaction's begin, the lead's fence, the
  statement, the commit). A key seen for the first time costs an
  ``INSERT … ON CONFLICT DO NOTHING`` and the take again. Every :data:`PRUNE_EVERY` seconds a
  take also deletes the rows idle for :data:`IDLE` (a full bucket, no pause: what a missing row
  says), skipping rows another take holds. At most :data:`AT_ONCE` statements of one instance
  run at once, so a burst of sends leaves the runtime's pool its connections.
* **A reservation is spent** even when its sender is cancelled while it waits: the budget errs
  on the side of sending less.

The statements are valid on SQLite too (run in the runtime's one write transaction there), for
the tests; ``cluster.enabled`` itself needs PostgreSQL.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from agentgram.runtime.infra.errors import RuntimeFailure
from agentgram.runtime.infra.storage.budget_rows import SendBudgetRow
from agentgram.runtime.infra.storage.concurrency import insert_for
from agentgram.runtime.infra.storage.db import Database

T = TypeVar("T")

_BUDGET: sa.Table = SendBudgetRow.__table__  # type: ignore[attr-defined]

GLOBAL = "global"
"""The key of the bot's overall budget."""
AT_ONCE = 4
"""Statements one instance runs on the budget at once: they queue at the overall row anyway, and
a burst of sends must not take every connection of the pool the runtime writes through."""
PAUSE_CACHE = 0.2
"""Seconds a read pause is trusted before it is read again."""
KEPT_PAUSES = 1024
"""Past this many cached pauses, the stale ones are dropped."""
IDLE = 3600.0
"""A row whose bucket has been full and whose pause has been over this long is deleted."""
PRUNE_EVERY = 600.0
"""Seconds between two prunes by one instance."""
TAKE_TRIES = 3
"""Takes of a send whose rows keep going missing (created, then pruned) before it gives up."""
LATE = 0.05
"""Seconds past its reserved time a send may still go (an event loop's usual lateness is far less)."""
LATE_TRIES = 3
"""Reservations a late sender gives up before it goes however late (a loop that is always late)."""
OFFSET_KEPT = 10.0
"""Seconds a bound on the two clocks' offset is trusted (a hundred parts per million of drift: 1 ms)."""
_UNIX_JULIAN_DAY = 2440587.5


def chat_key(chat_id: int | str) -> str:
    """The key of one chat's budget."""
    return f"chat:{chat_id}"


class BudgetUnavailable(RuntimeFailure):
    """The database that holds the budget could not be reached: the send should wait and try again."""


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket: ``per_second`` tokens a second, at most ``burst`` of them at once."""

    per_second: float
    burst: int = 1

    def __post_init__(self) -> None:
        if self.per_second <= 0 or self.burst < 1:
            raise ValueError(f"a rate needs per_second > 0 and burst >= 1, not {self}")

    @property
    def step(self) -> float:
        """Seconds one token adds to the bucket's theoretical arrival time."""
        return 1.0 / self.per_second

    @property
    def span(self) -> float:
        """How far the theoretical arrival time may run ahead of a reservation (the burst's room)."""
        return (self.burst - 1) * self.step


# --- the database's clock, and the dialects' spellings ---------------------------------------


def _now(conn: Connection) -> sa.ColumnElement[float]:
    """The database's time in seconds since the epoch, as late as the statement reads it."""
    if conn.dialect.name == "sqlite":
        return (sa.func.julianday("now") - _UNIX_JULIAN_DAY) * 86400.0
    return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Double())


def _greatest(conn: Connection, *values: sa.ColumnElement[Any]) -> sa.ColumnElement[float]:
    """The largest of ``values`` (SQLite's ``max`` with several arguments is this function)."""
    if conn.dialect.name == "sqlite":
        return sa.func.max(*values)
    return sa.func.greatest(*values)


def _ready(conn: Connection, rates: Mapping[str, Rate], row: sa.FromClause) -> sa.ColumnElement[float]:
    """When a row's bucket allows its next send (and its pause is over): ``tat - span``, or later."""
    span = sa.case({key: sa.literal(rate.span, sa.Double()) for key, rate in rates.items()}, value=row.c.key)
    return _greatest(conn, row.c.tat - span, row.c.paused_until)


def _take_statement(conn: Connection, rates: Mapping[str, Rate]) -> sa.Executable:
    """The reservation of one send (module docstring): every key of ``rates`` at one time, the
    overall key's earliest (or now), provided no other key holds the send back past it. Returns,
    per key, that time and the database's now; no row when a key has no row yet or another key
    held the send back (:func:`_readiness` says which)."""
    keys = sorted(rates)
    now = _now(conn)
    locked = sa.select(_BUDGET.c.key, _BUDGET.c.tat, _BUDGET.c.paused_until).where(_BUDGET.c.key.in_(keys))
    if conn.dialect.name == "postgresql":
        locked = locked.order_by(_BUDGET.c.key).with_for_update()  # in key order: no deadlock
    held = locked.cte("held")
    ready = _ready(conn, rates, held)
    overall = held.c.key == GLOBAL
    slot = sa.select(
        _greatest(conn, now, sa.func.max(sa.case((overall, ready)))).label("send_at"),
        sa.func.max(sa.case((~overall, ready))).label("others_ready"),
        sa.func.count().label("found"),
    ).cte("slot")
    send_at = sa.select(slot.c.send_at).scalar_subquery()
    others_ready = sa.select(slot.c.others_ready).scalar_subquery()
    step = sa.case(
        {key: sa.literal(rate.step, sa.Double()) for key, rate in rates.items()}, value=_BUDGET.c.key
    )
    return (
        sa.update(_BUDGET)
        .where(
            _BUDGET.c.key.in_(keys),
            sa.select(slot.c.found).scalar_subquery() == len(keys),
            sa.or_(others_ready.is_(None), others_ready <= send_at),
        )
        .values(tat=_greatest(conn, _BUDGET.c.tat, send_at) + step, due=send_at)
        .returning(_BUDGET.c.due, now)
        .add_cte(held)
        .add_cte(slot)
    )


def _readiness(conn: Connection, rates: Mapping[str, Rate]) -> tuple[dict[str, float], float]:
    """When each key's bucket allows a send and its pause is over (a key without a row is
    missing), and the database's now."""
    rows = conn.execute(
        sa.select(_BUDGET.c.key, _ready(conn, rates, _BUDGET), _now(conn)).where(
            _BUDGET.c.key.in_(sorted(rates))
        )
    ).all()
    now = float(rows[0][2]) if rows else 0.0
    return {str(key): float(ready) for key, ready, _ in rows}, now


def _create_rows(conn: Connection, keys: Iterable[str]) -> None:
    """Rows for keys that have none: full buckets, unpaused (a concurrent creator's row stays)."""
    now = _now(conn)
    for key in keys:
        conn.execute(
            insert_for(conn, _BUDGET)
            .values(key=key, tat=now, due=now, paused_until=0.0)
            .on_conflict_do_nothing(index_elements=[_BUDGET.c.key])
        )


def _prune(conn: Connection) -> int:
    """Delete the rows idle for :data:`IDLE` (never one a take holds now); how many."""
    old = _now(conn) - IDLE
    idle = sa.select(_BUDGET.c.key).where(_BUDGET.c.tat < old, _BUDGET.c.paused_until < old)
    if conn.dialect.name == "postgresql":
        idle = idle.order_by(_BUDGET.c.key).with_for_update(skip_locked=True)
    return int(conn.execute(sa.delete(_BUDGET).where(_BUDGET.c.key.in_(idle.scalar_subquery()))).rowcount)


@dataclass(frozen=True, slots=True)
class Slot:
    """What a take got: a time on the monotonic clock, and whether a send is reserved for it
    (``False``: the chat holds the send back until then and nothing is reserved; take again)."""

    at: float
    reserved: bool

    def wait(self, now: float) -> float:
        """Seconds from ``now`` (monotonic) until the slot's time; 0 once it passed."""
        return max(0.0, self.at - now)


class _DatabaseClock:
    """The database's clock on this process's monotonic clock, never ahead of it.

    A statement that read the database's clock at ``now`` was answered at ``answered`` (monotonic),
    so the offset between the clocks (the database's less the monotonic) is at least ``now -
    answered``: the largest of these is the tightest bound (NTP's reasoning). A reserved time
    converted with it is waited for late, never early, by the quickest recent answer's way back,
    however long other answers took to come (a queue at the overall row's lock, a busy event
    loop). The bound is the best of the last two :data:`OFFSET_KEPT` periods, so the two clocks'
    drift is followed."""

    def __init__(self) -> None:
        self._best = -math.inf
        self._before = -math.inf
        self._since = -math.inf

    def sample(self, db_now: float, answered: float) -> None:
        if answered - self._since > OFFSET_KEPT:
            self._before, self._best, self._since = self._best, -math.inf, answered
        self._best = max(self._best, db_now - answered)

    def local(self, db_time: float) -> float:
        """A time of the database's clock on the monotonic clock (never earlier than it is)."""
        return db_time - max(self._best, self._before)


@dataclass(slots=True)
class _Seen:
    """A pause as last read: when (monotonic) and until when (monotonic)."""

    read_at: float
    until: float


class SendBudget:
    """The send budget of a cluster's instances (module docstring), over the runtime's database."""

    def __init__(
        self, db: Database, *, pause_cache: float = PAUSE_CACHE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.db = db
        self.pause_cache = pause_cache
        self._clock = clock
        self._autocommit = db.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._statements = asyncio.Semaphore(AT_ONCE)
        self._pauses: dict[str, _Seen] = {}
        self._db_clock = _DatabaseClock()
        self._pruned_at = clock()

    async def _run(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` with a connection: its statements in autocommit on a server, in one write
        transaction on SQLite (its one writer); a database out of reach is :class:`BudgetUnavailable`."""
        try:
            if self.db.is_sqlite:
                return await self.db.write_sync(fn)
            async with self._statements, self._autocommit.connect() as conn:
                return await conn.run_sync(fn)
        except (SQLAlchemyError, OSError) as exc:
            raise BudgetUnavailable(f"the send budget is out of reach ({type(exc).__name__}: {exc})") from exc

    async def take(self, overall: Rate, chat: tuple[str, Rate] | None = None) -> Slot:
        """Reserve one send: a token of the overall budget (:data:`GLOBAL`, at ``overall``) and, when
        it goes to a chat, of that chat's (its key and rate), at one time (module docstring)."""
        rates = {GLOBAL: overall} if chat is None else {GLOBAL: overall, chat[0]: chat[1]}
        prune = self._clock() - self._pruned_at >= PRUNE_EVERY
        if prune:
            self._pruned_at = self._clock()

        def take(conn: Connection) -> tuple[float, float, float, bool] | None:
            """The time the send may go and the database's now (its clock), the monotonic time
            the answer came, and whether the send is reserved."""
            if prune:
                _prune(conn)
            for _ in range(TAKE_TRIES):
                taken = conn.execute(_take_statement(conn, rates)).first()
                if taken is not None:
                    return float(taken[0]), float(taken[1]), self._clock(), True
                ready, now = _readiness(conn, rates)
                answered = self._clock()
                missing = [key for key in rates if key not in ready]
                if not missing:  # the chat holds the send back: nothing reserved, ask again then
                    chat_ready = max((ready[key] for key in rates if key != GLOBAL), default=now)
                    return chat_ready, now, answered, False
                _create_rows(conn, missing)
            return None

        found = await self._run(take)
        if found is None:
            raise BudgetUnavailable(f"the send budget's rows for {sorted(rates)} keep going missing")
        at, now, answered, reserved = found
        self._db_clock.sample(now, answered)
        return Slot(self._db_clock.local(at), reserved)

    async def acquire(self, overall: Rate, chat: tuple[str, Rate] | None = None) -> None:
        """:meth:`take` until a send is reserved, then wait for its time (a cancel while waiting
        spends the reservation). A sender that is more than :data:`LATE` past its time when it
        could go (the answer came late, the event loop stalled, the process was paused) gives the
        reservation up and takes again, up to :data:`LATE_TRIES` times: going late, it would
        bunch up with the sends reserved after it."""
        late = 0
        while True:
            slot = await self.take(overall, chat)
            if (wait := slot.wait(self._clock())) > 0:
                await asyncio.sleep(wait)
            if slot.reserved:
                if self._clock() - slot.at <= LATE or late >= LATE_TRIES:
                    return
                late += 1

    async def pause(self, key: str, seconds: float) -> None:
        """No send of ``key`` for ``seconds`` from now, on any instance (a pause never shrinks)."""

        def pause(conn: Connection) -> None:
            now = _now(conn)
            statement = insert_for(conn, _BUDGET).values(
                key=key, tat=now, due=now, paused_until=now + seconds
            )
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[_BUDGET.c.key],
                    set_={
                        "paused_until": _greatest(
                            conn, _BUDGET.c.paused_until, statement.excluded.paused_until
                        )
                    },
                )
            )

        await self._run(pause)
        now = self._clock()
        seen = self._pauses.get(key)
        self._pauses[key] = _Seen(now, max(now + seconds, seen.until if seen is not None else 0.0))

    async def paused_for(self, *keys: str) -> float:
        """Seconds until none of ``keys`` is paused (0: now), read at most :attr:`pause_cache` ago."""
        now = self._clock()
        stale = [
            key
            for key in keys
            if (seen := self._pauses.get(key)) is None or now - seen.read_at >= self.pause_cache
        ]
        if stale:
            await self._read_pauses(stale)
            now = self._clock()
        return max([0.0, *(self._pauses[key].until - now for key in keys)])

    async def _read_pauses(self, keys: list[str]) -> None:
        def read(conn: Connection) -> tuple[dict[str, float], float, float]:
            """The keys' pauses and the database's now (a sample for its clock), one row at least."""
            clock = sa.select(_now(conn).label("now")).subquery()
            rows = conn.execute(
                sa.select(clock.c.now, _BUDGET.c.key, _BUDGET.c.paused_until).select_from(
                    clock.outerjoin(_BUDGET, _BUDGET.c.key.in_(keys))
                )
            ).all()
            pauses = {str(key): float(until) for _, key, until in rows if key is not None}
            return pauses, float(rows[0][0]), self._clock()

        pauses, db_now, answered = await self._run(read)
        self._db_clock.sample(db_now, answered)
        now = self._clock()
        if len(self._pauses) >= KEPT_PAUSES:
            for key in [key for key, seen in self._pauses.items() if now - seen.read_at >= self.pause_cache]:
                del self._pauses[key]
        for key in keys:
            until = self._db_clock.local(pauses[key]) if key in pauses else now
            self._pauses[key] = _Seen(now, max(now, until))


__all__ = ["GLOBAL", "PAUSE_CACHE", "BudgetUnavailable", "Rate", "SendBudget", "Slot", "chat_key"]
