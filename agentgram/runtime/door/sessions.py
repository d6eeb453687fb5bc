"""The sessions part of the door (``rt.sessions``): what a session runs on and what it has
used — its model (``/model``, a choice stored as control mail first), its cost (``/usage``), the
skills loaded at start (``/skills``) and its MCP servers (``/mcp``) — and which sessions a chat
has open (``/sessions``: one, or in a forum one per topic), with those spawned under them (issue
29: a spawned session reports to its root session's chat)."""

from __future__ import annotations

import uuid

from agentgram.runtime.capabilities.agents.skills import Skill, SkillCatalog
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog, McpServerStatus
from agentgram.runtime.core.mailbox import ControlAction, ControlBody
from agentgram.runtime.core.peers import PeerInfo, Peers
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.door.control import control_mail
from agentgram.runtime.door.values import PlaceSession, SessionRef, SpawnedSession
from agentgram.runtime.infra.config import DEFAULT_MODEL_NAME
from agentgram.runtime.infra.llm.models import ModelInfo, ModelRegistry, SessionCost, session_cost
from agentgram.runtime.infra.storage.models import SessionSource
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.usage_rows import UsageStore


class Sessions:
    def __init__(
        self,
        *,
        models: ModelRegistry,
        usage: UsageStore,
        desk: ControlDesk,
        skill_catalog: SkillCatalog,
        mcp_catalog: McpCatalog,
        session_store: SessionStore,
        peers: Peers,
    ) -> None:
        self.models = models
        self.usage = usage
        self.desk = desk
        self.skill_catalog = skill_catalog
        self.mcp_catalog = mcp_catalog
        self.session_store = session_store
        self.peers = peers

    @property
    def model_choices(self) -> tuple[ModelInfo, ...]:
        """The models ``/model`` offers: ``llm.model`` as ``default`` first, then ``llm.models``."""
        return self.models.infos

    async def session_model(self, session: SessionRef) -> ModelInfo:
        """The model the session's turns run on."""
        return self.models.info(await self.usage.chosen(session.id))

    async def choose_model(self, session: SessionRef, name: str) -> ModelInfo | None:
        """Switch the session to the named model from its next request on; ``None`` for a name
        not configured (nothing changes)."""
        if not self.models.knows(name):
            return None
        body = ControlBody(action=ControlAction.MODEL, model=None if name == DEFAULT_MODEL_NAME else name)
        envelope_id = f"model:{session.id}:{uuid.uuid4().hex}"
        await self.desk.send(control_mail(session.id, body, envelope_id), bool)
        return self.models.info(name)

    async def session_cost(self, session: SessionRef) -> SessionCost:
        """The session's tokens per model (its rounds and its sub-agents'), priced where prices are set."""
        usage, chosen = await self.usage.usage(session.id), await self.usage.chosen(session.id)
        return session_cost(self.models, usage, chosen)

    def skills(self) -> tuple[Skill, ...]:
        """The Agent Skills loaded at start, sorted by name (``/skills``)."""
        return self.skill_catalog.skills

    async def mcp_overview(self, session: SessionRef) -> list[McpServerStatus]:
        """Every enabled MCP server, sorted by name, with its state and whether ``session``
        activated it (``/mcp``)."""
        return await self.mcp_catalog.status(session.id)

    async def chat_sessions(
        self, chat_id: int, source: SessionSource = SessionSource.CHAT
    ) -> list[PlaceSession]:
        """The chat's active sessions of ``source``: its one, or in a forum one per topic that
        has been spoken in (General first, then by topic), each with its name and last message."""
        rows = await self.session_store.active_of_chat(chat_id, source)
        return [
            PlaceSession(session.id, session.thread_id, session.title, last)
            for session, last in rows
            if session.id is not None
        ]

    async def spawned(
        self, session_id: int, chat_id: int, *, source: SessionSource = SessionSource.CHAT
    ) -> SpawnedSession | None:
        """Session ``session_id`` if it was spawned under a session of ``source`` of the chat
        ``chat_id`` (a finished one too): a chat adapter's by default, a terminal's with
        ``source=TERMINAL``; ``None`` for any other (another chat's or source's, a chat's own,
        none)."""
        row = await self.session_store.get(session_id)
        if row is None or row.source != SessionSource.AGENT or row.chat_id != chat_id:
            return None
        root = await self.session_store.get(row.root_session_id) if row.root_session_id else None
        if root is None or root.source != source:
            return None
        return SpawnedSession(
            ref=SessionRef.of(row),
            name=row.name or row.agent_id,
            agent=row.agent_id,
            root_id=row.root_session_id or 0,
            finished=row.closed_at is not None,
            answers_call=row.parent_call_id is not None,
        )

    async def spawned_under(self, root_session_id: int) -> list[PeerInfo]:
        """The sessions spawned under the chat session ``root_session_id`` (at any depth), oldest
        first, each with its status (``/sessions``)."""
        return await self.peers.of_root(root_session_id)
