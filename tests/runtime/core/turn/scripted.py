"""A session hub on a real SQLite file with the scripted in-process LLM: no HTTP, no ``Runtime``.

What the runtime's facade does around the hub (store the mail, then act) is
done here the same way, in a few lines each (:meth:`HubRig.stop` stores the
stop, then cancels the turn). Two tools: ``hold``, allowed by a rule, runs
until the rig releases it; ``ask`` needs the user's approval.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pytest

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolRegistry
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.mailbox import (
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    Priority,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.core.sessions.hub import HubOptions, SessionHub, SessionWorker
from agentgram.runtime.core.sessions.state import Status, WorkerState
from agentgram.runtime.core.turn.context import ContextSettings
from agentgram.runtime.core.turn.deps import OneModel, TurnDeps
from agentgram.runtime.infra.config import ApprovalRuleSettings, ApprovalSettings
from agentgram.runtime.infra.events import Address, EventBus, Notice, TurnFinished
from agentgram.runtime.infra.llm.scripted import ScriptedLLM
from agentgram.runtime.infra.llm.types import ChatMessage, UserMessage
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.frames import FrameStore
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ChatSession, utcnow
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.runtime.core.turn.harness import Recorder

CHAT = 4242
IDLE = 0.05
"""A chat worker's idle timeout here (the product's is minutes)."""

E = TypeVar("E")

Transition = tuple[int, WorkerState, WorkerState, bool]
"""``(session, from, to, entered)``: every move a worker tried, refused ones too."""


class HoldArgs(ToolArgs):
    pass


class Hold(Tool[HoldArgs]):
    """Runs until :attr:`release` is set (then says so); :attr:`running` is set while it runs."""

    name = "hold"
    description = "waits"
    Args = HoldArgs

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.release = asyncio.Event()
        self.runs = 0

    async def execute(self, args: HoldArgs, ctx: ToolContext) -> str:
        self.runs += 1
        self.running.set()
        await self.release.wait()
        return "released"


class Ask(Tool[HoldArgs]):
    """No rule allows it: every call waits for the user's decision."""

    name = "ask"
    description = "needs approval"
    Args = HoldArgs

    async def execute(self, args: HoldArgs, ctx: ToolContext) -> str:
        return "asked and done"


@dataclass
class HubRig:
    db: Database
    services: TurnDeps
    hub: SessionHub
    llm: ScriptedLLM
    hold: Hold
    rec: Recorder
    transitions: list[Transition]
    evicted: list[int] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def configure(self, **changes: Any) -> TurnDeps:
        """The hub's dependencies with ``changes`` (they are frozen: a test rebuilds them, before the
        turn that should see them starts)."""
        self.services = replace(self.services, **changes)
        self.hub.deps = self.services
        return self.services

    async def chat(self) -> ChatSession:
        session, created = await self.services.sessions.find_or_open(CHAT, user_id=CHAT, language="en")
        self.hub.session_changed(session, created=created)
        return session

    def state(self, session: ChatSession) -> WorkerState | None:
        return self.hub.state(session.id or 0)

    def envelope(self, session: ChatSession, body: MailBody, *, interrupt: bool = False) -> Envelope:
        return Envelope(
            id=f"m{next(self._ids)}",
            session_id=session.id or 0,
            sender=Sender(kind=SenderKind.USER),
            priority=Priority.INTERRUPT if interrupt else Priority.NORMAL,
            body=body,
        )

    async def mail(self, session: ChatSession, body: MailBody, *, interrupt: bool = False) -> None:
        await self.services.mailbox.accept(self.envelope(session, body, interrupt=interrupt))

    async def say(self, session: ChatSession, text: str) -> None:
        await self.mail(session, UserMessageBody(text=text))

    async def stop(self, session: ChatSession) -> bool:
        """As ``Runtime.stop``: the stop mail, whose handler cancels the turn at once."""
        stop = self.envelope(session, ControlBody(action=ControlAction.STOP), interrupt=True)
        return await self.hub.stop(stop)

    async def pause(self, session: ChatSession) -> None:
        await self.mail(session, ControlBody(action=ControlAction.PAUSE), interrupt=True)

    async def resume(self, session: ChatSession) -> None:
        await self.mail(session, ControlBody(action=ControlAction.RESUME), interrupt=True)

    def finished(self) -> list[TurnFinished]:
        return [e for e in self.rec.events if isinstance(e, TurnFinished)]

    async def turns_finished(self, count: int = 1) -> list[TurnFinished]:
        await self.rec.wait_for(lambda: len(self.finished()) >= count)
        return self.finished()

    def notices(self) -> list[str]:
        return [e.key for e in self.rec.events if isinstance(e, Notice)]

    def moves(self, session: ChatSession) -> list[tuple[WorkerState, WorkerState]]:
        """The moves the session's workers made, in order (refused ones left out)."""
        return [(a, b) for sid, a, b, entered in self.transitions if sid == session.id and entered]

    def refused(self, session: ChatSession) -> list[tuple[WorkerState, WorkerState]]:
        return [(a, b) for sid, a, b, entered in self.transitions if sid == session.id and not entered]


def record_transitions(monkeypatch: pytest.MonkeyPatch, rec: Recorder) -> list[Transition]:
    """Every move any worker tries, through the real ``_move``."""
    seen: list[Transition] = []
    move = SessionWorker._move

    def recorded(self: SessionWorker, target: Status, *, may_not_apply: bool) -> bool:
        before = self.state
        entered = move(self, target, may_not_apply=may_not_apply)
        if before is not target.kind:  # new data for the same state (e.g. the prefetch, sent) is no move
            seen.append((self.session_id, before, target.kind, entered))
        rec.changed.set()
        return entered

    monkeypatch.setattr(SessionWorker, "_move", recorded)
    return seen


async def build_services(tmp_path: Path, llm: ScriptedLLM, tools: list[Tool[Any]], bus: EventBus) -> TurnDeps:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    await migrate(db)
    approvals = ApprovalManager(
        db, ApprovalSettings(rules=[ApprovalRuleSettings(tool="hold", action="allow")])
    )
    await approvals.load_rules()

    async def notice(
        address: Address, key: str, params: dict[str, str | int], *, refers_to_message: int | None = None
    ) -> None:
        bus.emit(Notice(to=address, key=key, params=params, refers_to_message=refers_to_message))

    workdir = tmp_path / "workspace"
    workdir.mkdir(exist_ok=True)
    return TurnDeps(
        db=db,
        sessions=SessionStore(db),
        history=HistoryStore(db),
        frames=FrameStore(db),
        mailbox=SqlMailbox(db),
        models=OneModel(llm),
        tools=ToolRegistry(tools),
        approvals=approvals,
        bus=bus,
        context=ContextSettings(
            static_system="You are a test.", workdir=workdir, timezone=ZoneInfo("UTC"), timezone_name="UTC"
        ),
        max_rounds=5,
        clock=utcnow,
        notice=notice,
    )


@asynccontextmanager
async def hub_rig(
    tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, *, hold: Hold | None = None
) -> AsyncIterator[HubRig]:
    """A started hub; ``hold`` is handed in to share one across a restart (a second rig)."""
    rec = Recorder()
    transitions = record_transitions(monkeypatch, rec)
    bus = EventBus()
    bus.subscribe(rec)
    hold = hold or Hold()
    services = await build_services(tmp_path, llm, [hold, Ask()], bus)
    hub = SessionHub(services, HubOptions(idle_timeout=IDLE))
    rig = HubRig(services.db, services, hub, llm, hold, rec, transitions)

    def evicted(session_id: int) -> None:
        rig.evicted.append(session_id)
        rec.changed.set()

    hub.evict_listeners.append(evicted)
    try:
        yield rig
    finally:
        await hub.shutdown()
        await services.db.close()


def users(messages: list[ChatMessage]) -> list[str]:
    """What the user said, as one request carried it."""
    return [m.content for m in messages if isinstance(m, UserMessage)]


def events_of(rec: Recorder, kind: type[E]) -> list[E]:
    return [e for e in rec.events if isinstance(e, kind)]
