"""The one request builder: what a round asks the model, and what the prefetch asks ahead of it.

:func:`build_request` is called by the round (:mod:`runtime.turn.graph`) and
by the prefetch (:func:`runtime.turn.steps.prefetch`) alike, so the two
cannot disagree about the history, the prompt, the notes, the tools, or
whether the session is headless (:func:`~runtime.storage.models.is_headless`).
The prefetch passes the mail about to be stored; the round reads it stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.turn.compaction import READ_LIMIT
from agentgram.runtime.core.turn.context import Compacted, ContextSettings, build_messages, images_needed
from agentgram.runtime.core.turn.prefetch import provisional_messages
from agentgram.runtime.core.turn.subagents import Level, root_level_as, task_level
from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.llm.types import ChatMessage, LLMClient
from agentgram.runtime.infra.storage.grant_rows import ROOT_FRAME
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import ChatSession, is_headless

if TYPE_CHECKING:
    from agentgram.runtime.core.turn.deps import TurnDeps
    from agentgram.runtime.core.turn.frame import Frame

History = tuple[list[HistoryEntry], Compacted | None]


class HistoryScope(Protocol):
    """Which history a frame reads, and whether the session's notes and instructions come with it."""

    async def read(self, deps: TurnDeps, session: ChatSession, compact: int | None) -> History: ...

    async def notes(self, deps: TurnDeps, session_id: int) -> str | None: ...

    def instructions(self, session: ChatSession) -> str | None:
        """What the session's place adds to the static prompt (a forum topic's prompt)."""
        ...


@dataclass(slots=True, frozen=True)
class SessionScope:
    """The root's: the session's history (compacted when due), its notes and its instructions."""

    async def read(self, deps: TurnDeps, session: ChatSession, compact: int | None) -> History:
        assert session.id is not None
        return await round_history(deps, session.id, ephemeral=is_headless(session.source), compact=compact)

    async def notes(self, deps: TurnDeps, session_id: int) -> str | None:
        return await deps.notes.context_text(session_id)

    def instructions(self, session: ChatSession) -> str | None:
        return session.instructions


@dataclass(slots=True, frozen=True)
class StackScope:
    """A sub-agent's: its own stack frame's newest rows, no notes, no instructions (it answers
    its parent, not the conversation they are for; nor does it get the chat's format rules)."""

    stack_id: int

    async def read(self, deps: TurnDeps, session: ChatSession, compact: int | None) -> History:
        assert session.id is not None
        limit = deps.context.max_history_messages
        return await deps.history.entries(session.id, limit=limit, stack_id=self.stack_id), None

    async def notes(self, deps: TurnDeps, session_id: int) -> str | None:
        return None

    def instructions(self, session: ChatSession) -> str | None:
        return None


async def round_history(
    deps: TurnDeps, session_id: int, *, ephemeral: bool, compact: int | None = None
) -> History:
    """A round's history: the newest ``max_history_messages`` — or, under compaction, what the
    summary in force does not cover, compacted first when it is due and ``compact`` (the static
    prompt's size) is given (the prefetch only reads)."""
    if not deps.compaction.applies(ephemeral=ephemeral):
        return await deps.history.entries(session_id, limit=deps.context.max_history_messages), None
    if compact is None:
        view = await deps.compaction.view(session_id)
    else:
        view = await deps.compaction.prepared(session_id, await deps.models.client_for(session_id), compact)
    return view.entries, view.compacted


def entries_a_round_reads(llm: LLMSettings) -> int:
    """The most history entries :func:`round_history` asks for: what a session's tail in memory
    needs to keep (:class:`~runtime.storage.history_tail.HistoryTails`), and no more."""
    if llm.compaction.enabled:
        return max(READ_LIMIT, llm.max_history_messages)  # an ephemeral session is not compacted
    return llm.max_history_messages


async def load_images(context: ContextSettings, entries: list[HistoryEntry]) -> None:
    """Read (off the event loop) the images a context shows, before its synchronous build."""
    await context.images.load(images_needed(entries, context))


def main_level(deps: TurnDeps, session: ChatSession) -> Level:
    """The root agent's level: the agent the session's ``agent_id`` names (``main`` if the catalog
    has none such) with its prompt, tools and model; no tool that waits for the user when headless."""
    spec = deps.agents.root_spec(session.id or 0, session.agent_id)  # 0: a session not stored
    if session.parent_call_id is not None:  # a sub-agent's task in a session of its own
        return task_level(spec, deps.tools, deps.agents)
    level = root_level_as(spec, deps.tools, deps.agents)
    return replace(level, tools=level.tools.for_headless()) if is_headless(session.source) else level


def root_context(deps: TurnDeps, session: ChatSession) -> ContextSettings:
    """The context settings of ``session``'s root agent, as its rounds build them (``/context``
    measures its static prompt)."""
    assert session.id is not None
    system = main_level(deps, session).system
    return deps.context_for(session.id, system, title=session.title, instructions=session.instructions)


async def level_client(deps: TurnDeps, session_id: int, level: Level) -> LLMClient:
    """The client ``level``'s requests go to: the model its agent names, else the session's. The
    prefetch and the round ask it alike, so a prefetched request goes to the model the round's would."""
    return deps.models.named(level.model) or await deps.models.client_for(session_id)


async def offered_tools(deps: TurnDeps, session: ChatSession, level: Level) -> ToolRegistry:
    """``level``'s tools plus the MCP tools its agent may call in its frame (within its allowlist)
    as the agent's grants now stand (``activate_tools`` in round N offers them from round N+1)."""
    assert session.id is not None
    spec = deps.agents.catalog.get(level.agent)
    allow = spec.tools if spec is not None else None
    return await deps.mcp.extend(level.tools, session.id, level.stack_id or ROOT_FRAME, allow)


@dataclass(slots=True, frozen=True)
class Request:
    """One round's request: the messages, the tools offered, the clock reading they were built with.

    ``messages`` is the round's to send: :meth:`~runtime.turn.loop.TurnRunner.call_model` empties
    it once a prefetched request is adopted in its place.
    """

    messages: list[ChatMessage]
    tools: ToolRegistry
    now: datetime


async def build_request(
    deps: TurnDeps,
    session: ChatSession,
    frame: Frame,
    *,
    now: datetime,
    mail: list[Envelope] | None = None,
    compact: bool = False,
) -> Request:
    """What ``frame`` asks the model now. ``mail``: the prefetch's, not stored yet (the context
    the round will build once it is); ``compact``: the round may compact the history first."""
    assert session.id is not None
    context = deps.context_for(
        session.id, frame.level.system, title=session.title, instructions=frame.scope.instructions(session)
    )
    entries, compacted = await frame.scope.read(
        deps, session, len(context.static_system) if compact else None
    )
    notes = await frame.scope.notes(deps, session.id)
    await load_images(context, entries)
    tools = await offered_tools(deps, session, frame.level)
    if mail is None:
        messages = build_messages(entries, context, now, notes=notes, compacted=compacted)
    else:
        messages = provisional_messages(entries, mail, context, now, notes=notes, compacted=compacted)
    return Request(messages, tools, now)


__all__ = [
    "HistoryScope",
    "Request",
    "SessionScope",
    "StackScope",
    "build_request",
    "level_client",
    "load_images",
    "main_level",
    "offered_tools",
    "round_history",
]
