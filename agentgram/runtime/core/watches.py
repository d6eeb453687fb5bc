"""Watches: one session hears of another's events as mail (issue 29; ``session-mailbox.md`` §7).

``watch_session`` asks for the watched session's matching events — a turn finished, a tool call
started or completed (``tool`` narrows these and approvals to a glob on the tool's name), an
approval requested — to reach the caller's mailbox as mail from the watched session: an
:class:`~runtime.core.mailbox.envelope.AgentMessageBody` whose text starts ``[watch]`` (one line,
:func:`watch_line`) and whose ``relation`` is :func:`runtime.core.peers.relation`'s, so whether it
wakes an idle watcher is its agent's ``wake_on`` as for any mail between sessions (a parent
watching its child is woken by default). No new body kind: the turn reads it like any other mail.

**Rules.** A session may watch only a session it may write to (:func:`~runtime.core.peers.may_write`),
not itself; it holds at most ``agent.max_watches`` watches, one per watched session (watching a
session again replaces that watch, so ``unwatch_session`` names the watched session, not a watch
id); a watch lives ``ttl_seconds`` (at most :data:`MAX_TTL`) and ends with either session (a
spawned one once closed, a chat's once no longer active, e.g. after ``/new``). What has ended is
deleted lazily (when an event finds it, when the watcher sets another) and on start.

**Mechanism.** Watches are rows (``session_watches``) so they survive a restart, and an index in
memory (watched session id → its watches), loaded on start and kept by the tools. The runtime's
:class:`~runtime.infra.events.EventBus` calls :class:`Watches` synchronously: it only matches and
queues (a bounded queue; a full one drops the event, logged), and one background task of its own
:class:`~runtime.infra.tasks.TaskSet` posts the mail in the order the events came, so the bus
never waits on the database. Each mail's envelope id is the watch's id and the event's identity
(``watch:<id>:call:<tool call>:end``…): an event emitted again (a call re-run after a restart) is a
duplicate in the mailbox, not a second mail. Its hop count is the watched session's
(:meth:`~runtime.core.peers.Peers.hops_of`) plus one, refused past ``agent.max_mail_hops`` like a
reply: two sessions watching each other cannot wake each other forever. A watcher whose mailbox is
full misses the event (logged); nothing blocks.

In a cluster each instance keeps its own index; :meth:`Watches.reload` (run on the ownership poll)
picks up what another instance set or removed within a poll.
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Session

from agentgram.runtime.core.mailbox import AgentMessageBody, Envelope, Sender, SenderKind
from agentgram.runtime.core.mailbox.mailbox import SqlMailbox
from agentgram.runtime.core.peers import PARENT, Peers, Refused, may_write, relation
from agentgram.runtime.infra.errors import MailboxFull
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    CallFinished,
    RuntimeEvent,
    ToolActivity,
    ToolPhase,
    TurnFinished,
)
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    SessionSource,
    SessionWatch,
    session_ended,
    utcnow,
)
from agentgram.runtime.infra.storage.rows import table_of
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("watches")

MAX_TTL = 86_400
"""The longest a watch lives, in seconds (a day): a forgotten watch does not outlive the work."""
DEFAULT_TTL = 3_600
QUEUED = 1_024
"""Events waiting to be posted; past this the bus's newest are dropped (logged), never waited on."""
RESULT_CHARS = 300
"""How much of a tool's result or a turn's answer a watch line quotes."""

_WATCHES = table_of(SessionWatch)
_SESSIONS = table_of(ChatSession)
_TALKING = (SessionSource.CHAT, SessionSource.TERMINAL, SessionSource.AGENT)


class WatchEvent(enum.StrEnum):
    """What a watch may ask for (``watch_session``'s ``events``)."""

    TURN_FINISHED = "turn.finished"
    TOOL_STARTED = "tool.started"
    TOOL_COMPLETED = "tool.completed"
    APPROVAL_REQUESTED = "approval.requested"


_EVENT_NAMES = frozenset(event.value for event in WatchEvent)
"""A stored name a later release no longer knows is skipped, not a failed load."""


@dataclass(slots=True, frozen=True)
class Watch:
    """One stored watch, as the index keeps it."""

    id: int
    watcher: int
    watched: int
    events: frozenset[WatchEvent]
    tool: str | None
    expires_at: datetime

    def matches(self, seen: Seen) -> bool:
        if seen.event not in self.events:
            return False
        if self.tool is None or seen.tool is None:  # a turn has no tool: the glob does not apply
            return True
        return fnmatch.fnmatchcase(seen.tool, self.tool)


@dataclass(slots=True, frozen=True)
class Seen:
    """A runtime event as a watch reads it: which session, what happened, its identity."""

    session_id: int
    event: WatchEvent
    key: str
    """The event's identity within its session: the tail of the mail's envelope id."""
    tool: str | None = None
    status: str | None = None
    detail: str = ""
    call_row: int | None = None  # a completed call's stored row: its result is quoted
    run_id: int | None = None  # a detached call's run: its result is quoted


_ENDED = {
    ToolPhase.DONE: "completed",
    ToolPhase.FAILED: "failed",
    ToolPhase.REJECTED: "rejected",
    ToolPhase.CANCELLED: "cancelled",
}
"""A call's closing phases, worded as a detached call's end is (``CallFinished.status``)."""


def observed(event: RuntimeEvent) -> Seen | None:
    """What ``event`` is to a watch, or ``None`` when no watch asks for its kind. A detached
    call's ``detached`` phase is not an end: its :class:`CallFinished` is."""
    to = event.to.session_id
    match event:
        case TurnFinished():
            key = f"turn:{event.turn_id}:{event.outcome}"
            return Seen(to, WatchEvent.TURN_FINISHED, key, status=str(event.outcome), detail=event.text)
        case ToolActivity(phase=ToolPhase.STARTED):
            key = f"call:{event.tool_call_id}:start"
            return Seen(to, WatchEvent.TOOL_STARTED, key, tool=event.name, detail=event.summary)
        case ToolActivity() if event.phase in _ENDED:
            key = f"call:{event.tool_call_id}:end"
            status = _ENDED[event.phase]
            return Seen(to, WatchEvent.TOOL_COMPLETED, key, event.name, status, call_row=event.tool_call_id)
        case CallFinished():
            key = f"run:{event.run_id}:end"
            return Seen(to, WatchEvent.TOOL_COMPLETED, key, event.name, event.status, run_id=event.run_id)
        case ApprovalRequested():
            details = event.details
            what = details.command or details.path or details.read_path or ""
            key = f"approval:{event.request_id}"
            return Seen(to, WatchEvent.APPROVAL_REQUESTED, key, tool=details.tool_name, detail=what)
    return None


def watch_line(watched_id: int, seen: Seen, result: str | None = None) -> str:
    """The one wording of a watch's mail, e.g. ``[watch] session 7: tool execute_cmd completed
    (status completed): <the start of its result>``."""
    head = f"[watch] session {watched_id}:"
    match seen.event:
        case WatchEvent.TURN_FINISHED:
            line = f"{head} turn finished ({seen.status})"
            quoted = seen.detail
        case WatchEvent.TOOL_STARTED:
            line = f"{head} tool {seen.tool} started"
            quoted = seen.detail
        case WatchEvent.TOOL_COMPLETED:
            line = f"{head} tool {seen.tool} completed (status {seen.status})"
            quoted = result or ""
        case WatchEvent.APPROVAL_REQUESTED:
            line = f"{head} approval requested for {seen.tool}"
            quoted = seen.detail
    return f"{line}: {_short(quoted)}" if quoted.strip() else line


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def ended(session: ChatSession) -> bool:
    """A spawned session ends when closed; a chat's (or terminal's) when no longer active."""
    return session_ended(session.source, session.active, session.closed_at)


def _live(sessions: sa.FromClause) -> sa.ColumnElement[bool]:
    """:func:`ended`'s negation in SQL, on an alias of ``sessions``."""
    return sa.and_(
        sessions.c.closed_at.is_(None),
        sa.or_(sessions.c.source == SessionSource.AGENT, sessions.c.active.is_(True)),
    )


class CapReached(Exception):
    """The watcher holds ``agent.max_watches`` watches already."""


class WatchStore:
    """The ``session_watches`` rows."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def live(self, now: datetime) -> list[Watch]:
        """Every watch not expired whose two sessions have not ended."""
        watcher, watched = _SESSIONS.alias("watcher"), _SESSIONS.alias("watched")
        query = (
            sa.select(_WATCHES)
            .join(watcher, watcher.c.id == _WATCHES.c.watcher_session_id)
            .join(watched, watched.c.id == _WATCHES.c.watched_session_id)
            .where(_WATCHES.c.expires_at > now, _live(watcher), _live(watched))
            .order_by(_WATCHES.c.id)
        )

        def read(tx: Session) -> list[Watch]:
            return [_watch(row) for row in tx.execute(query).mappings()]

        return await self._db.read_sync(read)

    async def purge(self, now: datetime) -> int:
        """Delete the watches that expired or lost a session (on start); how many."""
        watcher, watched = _SESSIONS.alias("watcher"), _SESSIONS.alias("watched")
        kept = (
            sa.select(_WATCHES.c.id)
            .join(watcher, watcher.c.id == _WATCHES.c.watcher_session_id)
            .join(watched, watched.c.id == _WATCHES.c.watched_session_id)
            .where(_live(watcher), _live(watched))
        )
        statement = sa.delete(_WATCHES).where(
            sa.or_(_WATCHES.c.expires_at <= now, _WATCHES.c.id.not_in(kept))
        )
        return await self._db.write_sync(lambda tx: tx.execute(statement).rowcount)

    async def put(
        self,
        watcher: int,
        watched: int,
        events: Iterable[WatchEvent],
        tool: str | None,
        *,
        expires_at: datetime,
        cap: int,
        now: datetime,
    ) -> tuple[Watch, list[int]]:
        """Store a watch, replacing the watcher's of the same session; the new watch and the ids
        of those it replaced or found ended. :class:`CapReached` (nothing changed) when the
        watcher holds ``cap`` others."""
        live_sessions = sa.select(_SESSIONS.c.id).where(_live(_SESSIONS))
        gone = sa.and_(
            _WATCHES.c.watcher_session_id == watcher,
            sa.or_(
                _WATCHES.c.watched_session_id == watched,
                _WATCHES.c.expires_at <= now,
                _WATCHES.c.watched_session_id.not_in(live_sessions),
            ),
        )
        values = {
            "watcher_session_id": watcher,
            "watched_session_id": watched,
            "events": sorted(str(event) for event in set(events)),
            "tool": tool,
            "expires_at": expires_at,
            "created_at": now,
        }

        def write(tx: Connection) -> tuple[Watch, list[int]]:
            dropped = list(tx.execute(sa.delete(_WATCHES).where(gone).returning(_WATCHES.c.id)).scalars())
            held = tx.execute(
                sa.select(sa.func.count()).where(_WATCHES.c.watcher_session_id == watcher)
            ).scalar_one()
            if held >= cap:
                raise CapReached(held)  # rolled back: the replaced watch stays
            row = tx.execute(sa.insert(_WATCHES).values(values).returning(*_WATCHES.c)).mappings().one()
            return _watch(row), dropped

        return await self._db.write_sync(write)

    async def delete(self, watch_ids: Iterable[int]) -> None:
        ids = list(watch_ids)
        if ids:
            await self._db.write_sync(
                lambda tx: tx.execute(sa.delete(_WATCHES).where(_WATCHES.c.id.in_(ids)))
            )

    async def delete_pair(self, watcher: int, watched: int) -> list[int]:
        """Remove ``watcher``'s watch of ``watched``; the ids removed."""
        statement = (
            sa.delete(_WATCHES)
            .where(_WATCHES.c.watcher_session_id == watcher, _WATCHES.c.watched_session_id == watched)
            .returning(_WATCHES.c.id)
        )
        return await self._db.write_sync(lambda tx: list(tx.execute(statement).scalars()))


def _watch(row: sa.RowMapping) -> Watch:
    return Watch(
        id=row["id"],
        watcher=row["watcher_session_id"],
        watched=row["watched_session_id"],
        events=frozenset(WatchEvent(name) for name in row["events"] if name in _EVENT_NAMES),
        tool=row["tool"],
        expires_at=row["expires_at"],
    )


@dataclass(slots=True, frozen=True)
class _Job:
    watch: Watch
    seen: Seen


class Watches:
    """The watches: set and removed by the tools, fed by the event bus (module docstring)."""

    def __init__(
        self,
        store: WatchStore,
        sessions: SessionStore,
        peers: Peers,
        mailbox: SqlMailbox,
        history: HistoryStore,
        background: BackgroundStore,
        *,
        cap: int,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._peers = peers
        self._mailbox = mailbox
        self._history = history
        self._background = background
        self.cap = cap
        self._now = now
        self._by_id: dict[int, Watch] = {}
        self._by_watched: dict[int, dict[int, Watch]] = {}
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(QUEUED)
        self._tasks = TaskSet("watches")
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    # --- lifecycle ------------------------------------------------------------------------------

    async def load(self) -> None:
        """On start: what expired or lost a session meanwhile is deleted, the rest indexed."""
        purged = await self._store.purge(self._now())
        if purged:
            log.info("deleted %s watches that expired or lost a session", purged)
        await self.reload()

    async def reload(self) -> None:
        """The index read anew from the rows (a cluster's poll: another instance's watches)."""
        watches = await self._store.live(self._now())
        self._by_id.clear()
        self._by_watched.clear()
        for watch in watches:
            self._index(watch)

    async def idle(self) -> None:
        """Until every event queued so far has been posted (or dropped)."""
        await self._queue.join()

    async def close(self) -> None:
        """No more events are taken; the poster stops (an event not posted yet is lost)."""
        self._closed = True
        await self._tasks.close()

    # --- the tools ------------------------------------------------------------------------------

    async def watch(
        self, caller_id: int, target: str | int, events: Iterable[WatchEvent], tool: str | None, ttl: int
    ) -> Watch:
        """Watch session ``target`` (an id, or ``"parent"``) for ``events`` for ``ttl`` seconds."""
        caller = await self._peers.session(caller_id)
        watched = await self._target(caller, target)
        spec = self._peers.spec_of(caller)
        if not may_write(spec, caller, watched):
            raise Refused(
                f"not permitted: agent {spec.name!r} may watch its parent, its children and sessions "
                f"within its mail_scope {spec.mail_scope!r}; session {watched.id} is not one"
            )
        wanted = set(events)
        if not wanted:
            raise Refused(f"name at least one event to watch: {', '.join(WatchEvent)}")
        now = self._now()
        seconds = max(1, min(ttl, MAX_TTL))
        assert caller.id is not None and watched.id is not None
        try:
            watch, dropped = await self._store.put(
                caller.id,
                watched.id,
                wanted,
                tool or None,
                expires_at=now + timedelta(seconds=seconds),
                cap=self.cap,
                now=now,
            )
        except CapReached:
            raise Refused(
                f"too many watches: this session holds {self.cap} (agent.max_watches); "
                "unwatch_session one first, or let one expire"
            ) from None
        self._forget(dropped)
        self._index(watch)
        return watch

    async def unwatch(self, caller_id: int, target: str | int) -> int:
        """Stop the caller's watch of ``target``; the id of the watch removed."""
        caller = await self._peers.session(caller_id)
        watched = await self._target(caller, target, finished_too=True)
        assert watched.id is not None
        removed = await self._store.delete_pair(caller_id, watched.id)
        self._forget(removed)
        if not removed:
            raise Refused(f"this session does not watch session {watched.id}")
        return removed[0]

    async def _target(
        self, caller: ChatSession, target: str | int, *, finished_too: bool = False
    ) -> ChatSession:
        if isinstance(target, str) and target.strip().lower() == PARENT:
            if caller.parent_session_id is None:
                raise Refused("this session has no parent: it was not spawned by another session")
            target = caller.parent_session_id
        try:
            session_id = int(str(target).strip().lstrip("#"))
        except ValueError:
            raise Refused(f'unknown session {target!r}: give a session id or "parent"') from None
        found = await self._sessions.get(session_id)
        if found is None or found.source not in _TALKING:
            raise Refused(f"there is no session {session_id} (list_sessions shows the ones there are)")
        if found.id == caller.id:
            raise Refused("a session cannot watch itself")
        if ended(found) and not finished_too:
            raise Refused(f"session {session_id} has finished: there is nothing left to watch")
        return found

    # --- the index ------------------------------------------------------------------------------

    def _index(self, watch: Watch) -> None:
        self._by_id[watch.id] = watch
        self._by_watched.setdefault(watch.watched, {})[watch.id] = watch

    def _forget(self, watch_ids: Iterable[int]) -> None:
        for watch_id in watch_ids:
            watch = self._by_id.pop(watch_id, None)
            if watch is None:
                continue
            of_session = self._by_watched.get(watch.watched, {})
            of_session.pop(watch_id, None)
            if not of_session:
                self._by_watched.pop(watch.watched, None)

    def watching(self, session_id: int) -> list[Watch]:
        """The live index's watches of ``session_id`` (what its events are matched against)."""
        return list(self._by_watched.get(session_id, {}).values())

    # --- the bus --------------------------------------------------------------------------------

    def __call__(self, event: RuntimeEvent) -> None:
        """The bus's subscriber: match and queue, never wait."""
        watches = self._by_watched.get(event.to.session_id)
        if not watches or self._closed:
            return
        what = observed(event)
        if what is None:
            return
        for watch in list(watches.values()):
            if watch.matches(what):
                self._enqueue(_Job(watch, what))

    def _enqueue(self, job: _Job) -> None:
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            log.warning("watch %s: %s events queued; dropped %s", job.watch.id, QUEUED, job.seen.key)
            return
        if self._worker is None or self._worker.done():
            self._worker = self._tasks.spawn(self._post_all(), name="watches")

    async def _post_all(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await self._post(job.watch, job.seen)
            except Exception:
                log.exception("watch %s: posting %s failed", job.watch.id, job.seen.key)
            finally:
                self._queue.task_done()

    async def _post(self, watch: Watch, what: Seen) -> None:
        """One event as mail to the watcher, unless the watch has ended (then it is deleted)."""
        if watch.expires_at <= self._now():
            await self._end(watch, "expired")
            return
        watcher = await self._sessions.get(watch.watcher)
        watched = await self._sessions.get(watch.watched)
        if watcher is None or watched is None or ended(watcher) or ended(watched):
            await self._end(watch, "a session ended")
            return
        hops = await self._peers.hops_of(watch.watched) + 1
        if hops > self._peers.max_hops:
            log.info("watch %s: %s dropped at hop %s (agent.max_mail_hops)", watch.id, what.key, hops)
            return
        envelope = Envelope(
            id=f"watch:{watch.id}:{what.key}",
            session_id=watch.watcher,
            sender=Sender(kind=SenderKind.SESSION, ref=str(watch.watched)),
            body=AgentMessageBody(
                text=watch_line(watch.watched, what, await self._result(what)),
                relation=relation(watched, watcher).value,
            ),
            hops=hops,
        )
        try:
            await self._mailbox.accept(envelope)
        except MailboxFull:
            log.warning(
                "watch %s: session %s's mailbox is full; %s dropped", watch.id, watch.watcher, what.key
            )

    async def _result(self, what: Seen) -> str | None:
        if what.call_row is not None:
            call = await self._history.call(what.call_row)
            return call.result if call is not None else None
        if what.run_id is not None:
            run = await self._background.get(what.run_id)
            return run.result if run is not None else None
        return None

    async def _end(self, watch: Watch, why: str) -> None:
        log.info(
            "watch %s of session %s by session %s ended: %s", watch.id, watch.watched, watch.watcher, why
        )
        self._forget([watch.id])
        await self._store.delete([watch.id])


__all__ = [
    "DEFAULT_TTL",
    "MAX_TTL",
    "Seen",
    "Watch",
    "WatchEvent",
    "WatchStore",
    "Watches",
    "ended",
    "observed",
    "watch_line",
]
