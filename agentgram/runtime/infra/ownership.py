"""Sessions owned one by one: each chat runs on the instance that holds its lease.

With ``cluster.enabled`` and the chat platform's updates reaching every instance (webhook mode:
the adapter calls :meth:`Ownership.spread`), the instances share the chats instead of one
leader running them all:

* **A chat's owner** is a fenced lease (:class:`~runtime.infra.cluster.Leases`, kind ``chat``,
  key the chat id): the instance that holds it runs every session of that chat, its turns, its
  outbox and its recovery. Ownership is per chat, not per session row, so a chat's sessions (the
  active one, those ``/new`` left behind) and its one send path live in one process, and the
  chat's session cache there is the truth. A lease is claimed the first time an instance needs the
  chat (an update for it, mail to one of its sessions, a scan) if nobody live holds it, and kept
  while the instance lives: the next update goes to the same owner. A graceful stop releases them
  all at once.
* **Where an update goes** (:meth:`Ownership.place`): here when this instance holds the chat or
  has just claimed it, else the live owner (the adapter relays the update there); ``None`` when
  the owner cannot be reached right now (the adapter answers 503 and the platform retries).
* **Recovery per claimed chat.** A claim that changes the holder runs the :meth:`on_claimed` hooks
  for that chat before anything of it runs here: the runtime closes what the previous owner left
  in the chat, sends what it never showed, orphans the calls it ran, resumes its turns and reads
  its unread mail (``Runtime._recover_chat``). A re-claim by the holder runs nothing.
* **The fence per session.** A session's worker runs in a task whose context holds the lease it
  runs under (:meth:`admit` sets it: the chat's lease and epoch, or the lead for a headless
  tic/cron session, which runs on the instance that runs the scheduler). Every write transaction
  checks that lease inside the transaction (:meth:`fence`, ``FOR SHARE`` on PostgreSQL), so a
  paused former owner's writes fail once another instance took the chat; it then leaves as a
  leader that lost the lead does (:data:`~runtime.infra.lead.EXIT_LEAD_LOST`: nothing it still
  holds in memory is written or sent). Writes outside a worker (accepting mail, the adapter's
  records) are not the owner's alone and are not fenced.
* **Takeover.** Every third of ``cluster.lease_ttl`` each instance scans for chats with work
  (a running turn, unread mail, a running call, an output never shown) whose lease nobody live
  holds, and claims them (:meth:`scan`). After a ``SIGKILL`` its chats continue elsewhere within
  the ttl plus one scan.
* **Mail between instances.** Mail accepted on an instance that does not run its session (the
  scheduler's, the web view's) is announced by ``NOTIFY`` inside its accept transaction
  (:meth:`announce`); the owner hears it (:mod:`runtime.infra.storage.notify`), applies control
  mail as if it had been stored there and wakes the session. A lost notification is caught by a
  poll every :data:`POLL_EVERY` seconds of the sessions this instance owns that have unread mail.

Without :meth:`spread` (polling mode, where one instance receives every update) the lead covers
every session as before (:mod:`runtime.infra.lead`) and nothing here runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from contextvars import Context, ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from agentgram.runtime.infra.cluster import Instance, Leases, holder_alive
from agentgram.runtime.infra.lead import LEAD_KEY, Lead, LeadLost
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.background_rows import BackgroundCallRow, RunStatus
from agentgram.runtime.infra.storage.cluster_rows import LeaseKind, LeaseRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    HEADLESS_SOURCES,
    ChatSession,
    MailRow,
    OutboxRow,
    Turn,
    TurnStatus,
    is_headless,
    utcnow,
)
from agentgram.runtime.infra.storage.notify import CHANNEL, Listener, notify
from agentgram.runtime.infra.tasks import TaskSet, cancel_and_wait

log = get_logger("cluster")

POLL_EVERY = 1.5
"""Seconds between two looks for unread mail of the sessions this instance owns (a lost ``NOTIFY``
is caught within this), and between two reloads of what every instance caches (approval rules)."""
PLACE_KEPT = 2.0
"""Seconds another instance's ownership of a chat is remembered before it is looked up again (a
failed relay forgets it at once)."""
RECENT_OUTPUT = timedelta(days=1)
"""Outputs older than this that no chat showed are not a reason to claim their chat."""

HERE: Literal["here"] = "here"
"""What :meth:`Ownership.place` says when this instance runs the chat."""

_SESSIONS: sa.Table = ChatSession.__table__  # type: ignore[attr-defined]
_LEASES: sa.Table = LeaseRow.__table__  # type: ignore[attr-defined]
_TURNS: sa.Table = Turn.__table__  # type: ignore[attr-defined]
_MAIL: sa.Table = MailRow.__table__  # type: ignore[attr-defined]
_RUNS: sa.Table = BackgroundCallRow.__table__  # type: ignore[attr-defined]
_OUTBOX: sa.Table = OutboxRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Held:
    """The lease a task's writes run under (the fence checks it)."""

    kind: LeaseKind
    key: int
    epoch: int


_HELD: ContextVar[Held | None] = ContextVar("agentgram_held_lease", default=None)

ClaimHook = Callable[[int], Awaitable[None]]
MailHook = Callable[[int, str | None], Awaitable[None]]
"""Mail another instance stored for a session this one runs: the session id, and the envelope's id
when a notification named it (``None``: the poll found unread mail)."""


class Ownership:
    """This instance's chats (module docstring); the cluster's part of the door."""

    def __init__(self, lead: Lead, db: Database) -> None:
        self.lead = lead
        self.db = db
        self._held: dict[int, int] = {}
        """Chat id → the epoch this instance holds it at."""
        self._sessions: set[int] = set()
        """The sessions admitted here (:meth:`announce` tells nobody of their mail)."""
        self._claims: dict[int, asyncio.Task[int | None]] = {}
        self._recovering: dict[int, asyncio.Event] = {}
        """Chats claimed whose recovery has not ended: an update waits for it (:meth:`place`)."""
        self._elsewhere: dict[int, tuple[float, Instance]] = {}
        self._claim_hooks: list[ClaimHook] = []
        self._mail_hooks: list[MailHook] = []
        self._poll_hooks: list[Callable[[], Awaitable[None]]] = []
        self._tasks = TaskSet("ownership")
        self._listener: Listener | None = None
        self._loops: list[asyncio.Task[None]] = []

    # --- the door's part -------------------------------------------------------------------

    @property
    def instance_id(self) -> int:
        return self.lead.instance_id

    @property
    def instance_name(self) -> str:
        return self.lead.instance_name

    @property
    def relay_url(self) -> str | None:
        return self.lead.relay_url

    @relay_url.setter
    def relay_url(self, url: str | None) -> None:
        self.lead.relay_url = url

    def heartbeat_fresh(self) -> bool:
        return self.lead.heartbeat_fresh()

    async def leader(self) -> Instance | None:
        """The live instance that runs the scheduler."""
        return await self.lead.leader()

    @property
    def leading(self) -> bool:
        return self.lead.leading

    @property
    def spreading(self) -> bool:
        """The instances share the chats (:meth:`spread` was called)."""
        return self.lead.shares_chats

    def spread(self) -> None:
        """Every instance receives updates (webhook mode): share the chats (module docstring).
        Called by the adapter before the runtime starts."""
        self.lead.shares_chats = True

    def on_claimed(self, hook: ClaimHook) -> None:
        """Run ``hook(chat_id)`` when this instance has just claimed a chat from someone else (or
        first), before anything of the chat runs here."""
        self._claim_hooks.append(hook)

    def on_mail(self, hook: MailHook) -> None:
        self._mail_hooks.append(hook)

    def on_poll(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``hook`` every :data:`POLL_EVERY` seconds (caches another instance may change)."""
        self._poll_hooks.append(hook)

    def owns(self, chat_id: int) -> bool:
        return chat_id in self._held

    @property
    def chats(self) -> list[int]:
        """The chats this instance runs, by id."""
        return sorted(self._held)

    async def place(self, chat_id: int) -> Literal["here"] | Instance | None:
        """Where the chat's updates are handled: :data:`HERE` (held, or claimed now and recovered),
        the live instance that runs it, or ``None`` when that is nobody reachable right now."""
        if chat_id in self._held:
            await self._recovered(chat_id)
            return HERE
        loop = asyncio.get_running_loop()
        known = self._elsewhere.get(chat_id)
        if known is not None and loop.time() - known[0] < PLACE_KEPT:
            return known[1]
        if await self.enter(chat_id) is not None:
            await self._recovered(chat_id)
            return HERE
        owner = await self._leases().live_holder(LeaseKind.CHAT, chat_id)
        if owner is not None:
            self._elsewhere[chat_id] = (loop.time(), owner)
        return owner

    async def _recovered(self, chat_id: int) -> None:
        """Until the chat's recovery after its claim ended (the workers it wakes do not wait)."""
        recovering = self._recovering.get(chat_id)
        if recovering is not None:
            await recovering.wait()

    def forget_place(self, chat_id: int) -> None:
        """A relay to the chat's owner failed: look it up again next time."""
        self._elsewhere.pop(chat_id, None)

    # --- claims --------------------------------------------------------------------------

    def _leases(self) -> Leases:
        leases = self.lead.leases
        assert leases is not None, "the instance registers before it claims anything"
        return leases

    async def enter(self, chat_id: int) -> int | None:
        """This instance's epoch of the chat: held already, or claimed now (its recovery run
        before this returns); ``None`` while another live instance holds it."""
        epoch = self._held.get(chat_id)
        if epoch is not None:
            return epoch
        claim = self._claims.get(chat_id)
        if claim is None:  # one claim at a time per chat, whoever asks; unfenced (its own context)
            claim = asyncio.create_task(self._claim(chat_id), name=f"claim-chat-{chat_id}", context=Context())
            self._claims[chat_id] = claim
            claim.add_done_callback(lambda _done: self._claims.pop(chat_id, None))
        return await asyncio.shield(claim)

    async def _claim(self, chat_id: int) -> int | None:
        epoch = await self._leases().claim(LeaseKind.CHAT, chat_id)
        if epoch is None:
            return None
        recovering = self._recovering[chat_id] = asyncio.Event()
        self._held[chat_id] = epoch  # first: the workers the recovery wakes are admitted at once
        self._elsewhere.pop(chat_id, None)
        log.info("instance %s runs chat %d now (epoch %d)", self.lead.instance_name, chat_id, epoch)
        try:
            for hook in self._claim_hooks:
                try:
                    await hook(chat_id)
                except Exception:  # what recovery could not do is retried by the chat's next mail
                    log.exception("recovering chat %d after claiming it failed", chat_id)
        finally:
            recovering.set()
            del self._recovering[chat_id]
        return epoch

    async def admit(self, session: ChatSession) -> bool:
        """Whether this instance runs ``session`` now; if so, the calling task's writes are fenced
        by the session's lease from here on (a session worker calls it first)."""
        if not self.spreading:
            return True
        assert session.id is not None
        if is_headless(session.source):
            epoch = self.lead.epoch
            if epoch is None or not self.lead.leading:
                return False  # the scheduler's instance runs tic and cron turns
            _HELD.set(Held(LeaseKind.LEAD, LEAD_KEY, epoch))
            self._sessions.add(session.id)
            return True
        if session.chat_id is None:
            return True
        chat_epoch = await self.enter(session.chat_id)
        if chat_epoch is None:
            return False
        _HELD.set(Held(LeaseKind.CHAT, session.chat_id, chat_epoch))
        self._sessions.add(session.id)
        return True

    def fence(self, conn: Connection) -> None:
        """The check at the start of each write transaction: the lease of the task's session, if
        it runs under one (module docstring)."""
        held = _HELD.get()
        if held is not None:
            self.check(conn, held)

    def current(self) -> Held | None:
        """The lease the calling task writes under (``None``: not a session worker's task)."""
        return _HELD.get()

    def check(self, conn: Connection, lease: object) -> None:
        """:meth:`fence` for a lease read earlier (the mailbox's batch checks its submitters')."""
        held = lease
        assert isinstance(held, Held)
        if not self._leases().holds(conn, held.kind, held.key, held.epoch):
            self.lead.lose(f"another instance took {held.kind} {held.key} (a write was refused)")
            raise LeadLost(f"instance {self.lead.instance_name} no longer holds {held.kind} {held.key}")

    async def still_holds(self) -> bool:
        """After a heartbeat lapse: whether every chat this instance runs is still its own at its
        epoch (a lease taken meanwhile is lost: the instance leaves)."""
        if not self._held:
            return True
        mine = self.lead.instance_id

        def read(session: Session) -> dict[int, int]:
            rows = session.connection().execute(
                sa.select(_LEASES.c.key, _LEASES.c.epoch).where(
                    _LEASES.c.kind == LeaseKind.CHAT, _LEASES.c.instance_id == mine
                )
            )
            return {int(key): int(epoch) for key, epoch in rows}

        now = await self.db.read_sync(read)
        lost = [chat for chat, epoch in self._held.items() if now.get(chat) != epoch]
        if lost:
            self.lead.lose(f"its heartbeat lapsed and another instance took chat(s) {lost[:5]}")
            return False
        return True

    # --- mail between instances ------------------------------------------------------------

    def announce(self, conn: Connection, session_id: int, envelope_id: str) -> None:
        """Inside the accept transaction of mail: tell the session's owner, unless that is this
        instance (it hears its own mailbox)."""
        if not self.spreading or session_id in self._sessions:
            return
        payload = json.dumps({"s": session_id, "i": self.lead.instance_id, "e": envelope_id})
        notify(conn, CHANNEL, payload)

    def _heard(self, _channel: str, payload: str) -> None:
        try:
            said = json.loads(payload)
            session_id, instance, envelope = int(said["s"]), int(said["i"]), said.get("e")
        except (ValueError, KeyError, TypeError):
            log.warning("cluster: a notification that does not read: %r", payload[:200])
            return
        if instance == self.lead.instance_id:
            return
        self._tasks.spawn(self._mail_for(session_id, envelope), name=f"mail-for-{session_id}")

    async def _mail_for(self, session_id: int, envelope: str | None) -> None:
        if session_id not in self._sessions and not await self._runs_here(session_id):
            return  # another instance's session
        for hook in self._mail_hooks:
            await hook(session_id, envelope)

    async def _runs_here(self, session_id: int) -> bool:
        """A session this instance has not admitted yet runs here: a chat session of a chat it
        holds, or a headless one while it leads (the scheduler's)."""
        query = sa.select(_SESSIONS.c.chat_id, _SESSIONS.c.source).where(_SESSIONS.c.id == session_id)
        row = await self.db.read_sync(lambda session: session.connection().execute(query).first())
        if row is None:
            return False
        if row.source in HEADLESS_SOURCES:
            return self.lead.leading
        return row.chat_id is not None and int(row.chat_id) in self._held

    # --- the loops -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen for mail, scan for chats nobody runs (once now, then every third of the ttl)
        and poll (spread mode only)."""
        if not self.spreading:
            return
        self._listener = Listener(self.db, [CHANNEL], self._heard, on_reconnect=self._poll_soon)
        await self._listener.start()
        await self.scan()
        self._loops = [
            asyncio.create_task(
                self._every(self.lead.settings.lease_ttl / 3, self.scan), name="ownership-scan"
            ),
            asyncio.create_task(self._every(POLL_EVERY, self.poll), name="ownership-poll"),
        ]

    def _poll_soon(self) -> None:
        self._tasks.spawn(self.poll(), name="poll-after-reconnect")

    async def _every(self, seconds: float, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the database away for a moment: next time
                log.warning("cluster: %s failed (%s); trying again", getattr(work, "__name__", work), error)

    async def scan(self) -> None:
        """Claim every chat with work whose lease nobody live holds (module docstring)."""
        for chat_id in await self._orphaned_chats():
            await self.enter(chat_id)

    async def poll(self) -> None:
        """Wake the sessions of this instance's chats that have unread mail; run the poll hooks."""
        if self._held:
            for session_id in await self._with_mail():
                for mail_hook in self._mail_hooks:
                    await mail_hook(session_id, None)
        for poll_hook in self._poll_hooks:
            await poll_hook()

    async def _with_mail(self) -> list[int]:
        mine = self.lead.instance_id

        def read(session: Session) -> list[int]:
            query = (
                sa.select(_SESSIONS.c.id)
                .join(
                    _LEASES, sa.and_(_LEASES.c.kind == LeaseKind.CHAT, _LEASES.c.key == _SESSIONS.c.chat_id)
                )
                .where(
                    _LEASES.c.instance_id == mine,
                    _SESSIONS.c.source.not_in(list(HEADLESS_SOURCES)),
                    sa.exists().where(
                        _MAIL.c.session_id == _SESSIONS.c.id, _MAIL.c.seq > _SESSIONS.c.mail_cursor
                    ),
                )
            )
            return [int(i) for i in session.connection().execute(query).scalars()]

        return await self.db.read_sync(read)

    async def _orphaned_chats(self) -> list[int]:
        ttl = self.lead.settings.lease_ttl
        since = utcnow() - RECENT_OUTPUT

        def read(session: Session) -> list[int]:
            conn = session.connection()
            of_session = _SESSIONS.c.id
            work = sa.or_(
                sa.exists().where(_TURNS.c.session_id == of_session, _TURNS.c.status == TurnStatus.RUNNING),
                sa.exists().where(_MAIL.c.session_id == of_session, _MAIL.c.seq > _SESSIONS.c.mail_cursor),
                sa.exists().where(_RUNS.c.session_id == of_session, _RUNS.c.status == RunStatus.RUNNING),
                sa.exists().where(
                    _OUTBOX.c.session_id == of_session,
                    _OUTBOX.c.delivered_at.is_(None),
                    _OUTBOX.c.created_at >= since,
                ),
            )
            held = (
                sa.select(_LEASES.c.key)
                .where(_LEASES.c.kind == LeaseKind.CHAT, holder_alive(conn, ttl))
                .scalar_subquery()
            )
            query = (
                sa.select(_SESSIONS.c.chat_id)
                .where(
                    _SESSIONS.c.chat_id.is_not(None),
                    _SESSIONS.c.source.not_in(list(HEADLESS_SOURCES)),
                    _SESSIONS.c.chat_id.not_in(held),
                    work,
                )
                .distinct()
            )
            return sorted(int(c) for c in conn.execute(query).scalars())

        return await self.db.read_sync(read)

    async def close(self) -> None:
        """Stop listening and scanning (the leases go with :meth:`Lead.release`)."""
        for loop in self._loops:
            await cancel_and_wait(loop)
        self._loops = []
        for claim in list(self._claims.values()):
            claim.cancel()
        with contextlib.suppress(Exception):
            await self._tasks.close()
        if self._listener is not None:
            await self._listener.close()
            self._listener = None


__all__ = ["HERE", "POLL_EVERY", "Held", "Ownership"]
