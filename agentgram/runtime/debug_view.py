"""The read side of the web view: what the agent did, as typed values an adapter can serve.

:class:`DebugView` answers the web view's queries (the session list, a session's
whole tree, the tic and cron runs: docs/architecture/debug-view.md) and reads
the scheduler's and approvals' tables, over :mod:`runtime.storage`. ORM
rows stay in here: what leaves is the frozen pydantic models below, so a web
adapter can hand them to FastAPI as response models unchanged.

Design choices (docs/architecture/debug-view.md):

* Every string that leaves passes :func:`~runtime.log.redact` (the secrets
  registered with the log), once, where the value is built: a secret the
  model echoed in a tool result reads ``***`` here as in the log. A session's
  ``title`` (a group's name, with its forum topic's) is such text too.
* The detail tree is the root frame's rows in order; a sub-agent's frame
  follows the ``execute_task`` call that opened it, between an ``agent`` and
  an ``agent_end`` entry, its own rows (and frames) in between. An assistant
  row that asked for tool calls is ``thinking``, the one that answered is
  ``assistant``, each followed by its ``tool`` entries.
* Tool arguments are the parsed JSON when they parse, else the raw text.
* The ``subagent`` source filter lists the sessions a sub-agent worked in: a
  frame deeper than the root, or a session of its own that answered a root
  agent's ``execute_task`` call (:mod:`runtime.core.task_sessions`). Such a
  session's rows also follow that call in its caller's detail tree, between
  ``agent`` and ``agent_end`` entries that name it (``session_id``), at most
  :data:`MAX_TASK_DEPTH` sessions deep.
* A session another spawned (``agent``, :mod:`runtime.core.peers`) sits in a
  spawn tree: the detail carries that tree (its root chat session and every
  session under it, parents before children) and the mail between sessions
  this one sent or received. Both reads are capped at :data:`MAX_TREE` and
  :data:`MAX_MAIL` rows (the oldest sessions; the newest mail, shown oldest
  first), and say when they were cut. A session ended is one whose
  ``closed_at`` is set, or a chat's that is no longer its chat's active one
  (tic and cron sessions never are): the same rule as ``list_sessions``.
* Health is three states; the LLM endpoint is probed at most once per
  :data:`LLM_PROBE_EVERY` (a liveness probe every few seconds must not turn
  into as many requests to a paid API). The whole is down when the chat
  adapter or the database is; an unreachable LLM endpoint is reported but
  does not fail the probe (the chat still answers, with an error).
* The cluster (docs/operations/cluster.md) is read from its own tables with
  :mod:`runtime.infra.cluster`'s rules of liveness (a heartbeat younger than
  ``cluster.lease_ttl`` in the database's time, not stopped): every instance
  row, every lease and the leader. Without a cluster this process is
  ``single`` and nothing is read.
"""

from __future__ import annotations

import asyncio
import enum
import os
import socket
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlmodel import Session, col, select

from agentgram.runtime.capabilities.tools.base import json_object
from agentgram.runtime.core.mailbox import AgentMessageBody
from agentgram.runtime.infra.cluster import holder_alive, instance_alive
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.lead import LEAD_KEY, Lead
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.log import get_logger, redact
from agentgram.runtime.infra.storage.cluster_rows import InstanceRow, LeaseKind, LeaseRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ApprovalStatus,
    ChatSession,
    HistoryRow,
    MailKind,
    MailRow,
    Priority,
    Role,
    RowStatus,
    SenderKind,
    SessionSource,
    StackFrame,
    ToolCallRow,
    ToolCallStatus,
    session_ended,
)
from agentgram.runtime.infra.storage.scheduler_rows import (
    JobRun,
    JobRunStatus,
    ScheduledJob,
    TicRun,
    TicRunStatus,
)
from agentgram.runtime.scheduler.service import SchedulerService

log = get_logger("debug_view")

MAX_PER_PAGE = 100
MAX_TREE = 200
"""At most this many sessions of a spawn tree in one detail (the oldest: a root comes first)."""
MAX_MAIL = 200
MAX_TASK_DEPTH = 5
"""How many task sessions deep a detail tree follows sub-agents that ran as sessions."""
"""At most this many pieces of mail between sessions in one detail (the newest)."""
LLM_PROBE_EVERY = 30.0
"""Seconds a health answer about the LLM endpoint is reused."""
LLM_PROBE_TIMEOUT = 5.0
POLLING_DOWN_AFTER = 60.0
"""Seconds without a returned poll after which the chat adapter counts as down (``/healthz`` 503)."""


class _Value(BaseModel):
    # built on first use, not at import: only the web view reads these (issue 31, start-up)
    model_config = ConfigDict(frozen=True, defer_build=True)


# --- sessions -------------------------------------------------------------------------


def _ended(source: SessionSource, active: bool, closed_at: datetime | None) -> bool:
    """Whether a session is over (module docstring): the one rule the list and the tree show."""
    return session_ended(source, active, closed_at)


class SessionInfo(_Value):
    id: int
    source: SessionSource
    agent_id: str
    is_interactive: bool
    is_ephemeral: bool
    created_at: datetime
    chat_id: int | None
    thread_id: int
    """The session's forum topic (0: none)."""
    title: str | None
    """The chat's name when it has one (a group's, with its topic's: ``Team › Ideas``)."""
    active: bool
    """The chat's current session (a chat has one; a spawned session never is: ``closed_at`` ends it)."""
    closed_at: datetime | None
    parent_session_id: int | None
    """The session that spawned this one (``agent`` sessions); ``None`` for the others."""
    root_session_id: int | None
    """The chat session at the top of this one's spawn tree; ``None`` for a root."""
    name: str | None
    """What a spawned session is called (its agent's name when ``None``)."""

    @property
    def ended(self) -> bool:
        return _ended(self.source, self.active, self.closed_at)


class SessionSummary(SessionInfo):
    message_count: int
    last_message_at: datetime | None


class SessionPage(_Value):
    items: list[SessionSummary]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


class UserEntry(_Value):
    kind: Literal["user"] = "user"
    content: str
    is_synthetic: bool
    status: RowStatus
    created_at: datetime


class AssistantEntry(_Value):
    kind: Literal["assistant", "thinking"]
    content: str
    reasoning: str | None
    is_synthetic: bool
    status: RowStatus
    model: str | None
    input_tokens: int
    output_tokens: int
    created_at: datetime


class ToolEntry(_Value):
    kind: Literal["tool"] = "tool"
    id: int
    name: str
    arguments: object
    status: ToolCallStatus
    result: str | None
    started_at: datetime | None
    finished_at: datetime | None


class AgentEntry(_Value):
    kind: Literal["agent", "agent_end"]
    agent_id: str
    depth: int
    session_id: int | None = None
    """The session the sub-agent worked in when it was one of its own (a root agent's task,
    :mod:`runtime.core.task_sessions`); ``None``: a frame of this session."""


Entry = Annotated[UserEntry | AssistantEntry | ToolEntry | AgentEntry, Field(discriminator="kind")]


class TreeStatus(enum.StrEnum):
    ACTIVE = "active"
    CLOSED = "closed"


class TreeNode(_Value):
    """One session of a spawn tree, ``depth`` below its root (0), listed after its parent."""

    id: int
    parent_session_id: int | None
    depth: int
    name: str | None
    agent_id: str
    source: SessionSource
    status: TreeStatus
    created_at: datetime


class MailEntry(_Value):
    """A piece of mail one session sent another (``send_message``, a spawn's task)."""

    id: int
    accepted_at: datetime
    from_session_id: int | None
    """The sender (``None`` when the stored reference is not a session id)."""
    to_session_id: int
    relation: Literal["parent", "child", "peer"]
    """How the sender stands to the recipient (``parent``: the sender spawned it)."""
    hops: int
    seq: int
    """Its place in the recipient's mailbox."""
    interrupt: bool
    text: str


class SessionDetail(_Value):
    session: SessionInfo
    messages: list[Entry]
    tree: list[TreeNode]
    """The session's spawn tree: its root and every session under it (just itself when alone)."""
    tree_truncated: bool
    """More sessions are under the root than :data:`MAX_TREE`."""
    mail: list[MailEntry]
    """Mail between sessions this one sent or received, oldest first."""
    mail_truncated: bool
    """There is older such mail than :data:`MAX_MAIL` shows."""


# --- scheduler and approvals ------------------------------------------------------------


class JobInfo(_Value):
    id: int
    title: str
    schedule: str
    timezone: str
    prompt: str
    chat_id: int
    thread_id: int
    """The forum topic the job reports to (0: none)."""
    enabled: bool
    running: bool
    running_session_id: int | None
    next_run_at: datetime | None
    last_run_at: datetime | None


class JobRunInfo(_Value):
    id: int
    job_id: int
    session_id: int | None
    status: JobRunStatus
    scheduled_for: datetime | None
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int | None
    final_response: str | None
    error: str | None


class TicRunInfo(_Value):
    id: int
    session_id: int | None
    status: TicRunStatus
    started_at: datetime
    ended_at: datetime | None
    delivered: bool
    reason: str | None


class ApprovalInfo(_Value):
    id: str
    session_id: int
    tool: str
    arguments: object
    created_at: datetime
    expires_at: datetime | None


# --- cluster ------------------------------------------------------------------------------

_INSTANCES: sa.Table = InstanceRow.__table__  # type: ignore[attr-defined]
_LEASES: sa.Table = LeaseRow.__table__  # type: ignore[attr-defined]


class InstanceRole(enum.StrEnum):
    LEADER = "leader"
    STANDBY = "standby"
    """Polling: waits to take over from the leader, runs nothing."""
    MEMBER = "member"
    """Webhook mode: runs the chats it holds; not the scheduler (the leader's)."""
    SINGLE = "single"
    """No cluster: this process is the only one on its database."""


class ThisInstance(_Value):
    """The process answering; ``id`` is ``None`` without a cluster (or before it registered)."""

    id: int | None
    name: str
    host: str
    pid: int
    role: InstanceRole


class InstanceInfo(_Value):
    """A row of ``instances``; ``live``: not stopped, heartbeat younger than ``cluster.lease_ttl``."""

    id: int
    name: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    live: bool


class LeaseInfo(_Value):
    """A row of ``leases``; ``instance_id`` is ``None`` once released, ``live`` that its holder is."""

    kind: LeaseKind
    key: int
    instance_id: int | None
    instance_name: str | None
    epoch: int
    claimed_at: datetime
    live: bool


class ClusterInfo(_Value):
    enabled: bool
    instance: ThisInstance
    instances: list[InstanceInfo]
    leases: list[LeaseInfo]
    leader: InstanceInfo | None
    """The instance holding the ``lead`` lease (live or not), ``None`` when nobody does."""


def _this_instance(lead: Lead | None) -> ThisInstance:
    if lead is None:
        default = ClusterSettings()  # the name a cluster would give this process: <host>-<pid>
        return ThisInstance(
            id=None,
            name=redact(default.name()),
            host=redact(socket.gethostname()),
            pid=os.getpid(),
            role=InstanceRole.SINGLE,
        )
    registry = lead.registry
    try:
        instance_id: int | None = registry.id
    except RuntimeError:  # not registered yet
        instance_id = None
    if lead.leading:
        role = InstanceRole.LEADER
    else:
        role = InstanceRole.MEMBER if lead.shares_chats else InstanceRole.STANDBY
    return ThisInstance(
        id=instance_id, name=redact(registry.name), host=redact(registry.host), pid=registry.pid, role=role
    )


def _read_cluster(tx: Session, ttl: float) -> tuple[list[InstanceInfo], list[LeaseInfo]]:
    conn = tx.connection()
    rows = conn.execute(
        sa.select(_INSTANCES, instance_alive(conn, ttl).label("live")).order_by(_INSTANCES.c.id)
    ).all()
    instances = [
        InstanceInfo(
            id=row.id,
            name=redact(row.name),
            host=redact(row.host),
            pid=row.pid,
            started_at=row.started_at,
            heartbeat_at=row.heartbeat_at,
            stopped_at=row.stopped_at,
            live=bool(row.live),
        )
        for row in rows
    ]
    names = {instance.id: instance.name for instance in instances}
    held = conn.execute(
        sa.select(_LEASES, holder_alive(conn, ttl).label("live")).order_by(_LEASES.c.kind, _LEASES.c.key)
    ).all()
    leases = [
        LeaseInfo(
            kind=LeaseKind(row.kind),
            key=row.key,
            instance_id=row.instance_id,
            instance_name=None if row.instance_id is None else names.get(row.instance_id),
            epoch=row.epoch,
            claimed_at=row.claimed_at,
            live=bool(row.live),
        )
        for row in held
    ]
    return instances, leases


def _leader(instances: list[InstanceInfo], leases: list[LeaseInfo]) -> InstanceInfo | None:
    holder = next(
        (lease.instance_id for lease in leases if lease.kind == LeaseKind.LEAD and lease.key == LEAD_KEY),
        None,
    )
    return next((instance for instance in instances if instance.id == holder), None)


# --- health -------------------------------------------------------------------------------


class State(enum.StrEnum):
    OK = "ok"
    DOWN = "down"
    STARTING = "starting"


class Health(_Value):
    status: State
    polling: State
    llm: State
    db: State
    instance: str
    """This process's instance name (:attr:`ThisInstance.name`)."""
    role: InstanceRole


def _text(value: str | None) -> str | None:
    return None if value is None else redact(value)


def _arguments(raw: str) -> object:
    """The call's arguments as the tools read them (:func:`~runtime.capabilities.tools.base.json_object`),
    else the raw text."""
    text = redact(raw)
    try:
        return json_object(text)
    except ToolError:
        return text


def _info(row: ChatSession) -> SessionInfo:
    assert row.id is not None
    return SessionInfo(
        id=row.id,
        source=row.source,
        agent_id=row.agent_id,
        is_interactive=row.is_interactive,
        is_ephemeral=row.is_ephemeral,
        created_at=row.created_at,
        chat_id=row.chat_id,
        thread_id=row.thread_id,
        title=_text(row.title),
        active=row.active,
        closed_at=row.closed_at,
        parent_session_id=row.parent_session_id,
        root_session_id=row.root_session_id,
        name=_text(row.name),
    )


def _row_entry(row: HistoryRow, has_calls: bool) -> UserEntry | AssistantEntry:
    if row.role == Role.USER:
        return UserEntry(
            content=redact(row.content),
            is_synthetic=row.is_synthetic,
            status=row.status,
            created_at=row.created_at,
        )
    return AssistantEntry(
        kind="thinking" if has_calls else "assistant",
        content=redact(row.content),
        reasoning=_text(row.reasoning),
        is_synthetic=row.is_synthetic,
        status=row.status,
        model=row.model,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        created_at=row.created_at,
    )


def _tool_entry(call: ToolCallRow) -> ToolEntry:
    assert call.id is not None
    return ToolEntry(
        id=call.id,
        name=call.name,
        arguments=_arguments(call.arguments),
        status=call.status,
        result=_text(call.result),
        started_at=call.started_at,
        finished_at=call.finished_at,
    )


class _Tree:
    """One session's rows, calls and frames, read once and walked frame by frame."""

    def __init__(
        self,
        rows: Sequence[HistoryRow],
        calls: Sequence[ToolCallRow],
        frames: Sequence[StackFrame],
        tasks: dict[int, list[Entry]] | None = None,
    ):
        self.tasks = tasks or {}
        """Per ``execute_task`` call: the entries of the session that ran its task."""
        self.rows: dict[int | None, list[HistoryRow]] = {}
        for row in rows:
            self.rows.setdefault(row.stack_id, []).append(row)
        self.calls: dict[int, list[ToolCallRow]] = {}
        for call in calls:
            self.calls.setdefault(call.history_id, []).append(call)
        self.children: dict[int, list[StackFrame]] = {}
        for frame in frames:
            if frame.depth > 0 and frame.parent_tool_call_id is not None:
                self.children.setdefault(frame.parent_tool_call_id, []).append(frame)

    def entries(self, stack_id: int | None = None) -> list[Entry]:
        out: list[Entry] = []
        for row in self.rows.get(stack_id, []):
            calls = self.calls.get(row.id or 0, [])
            out.append(_row_entry(row, bool(calls)))
            for call in calls:
                out.append(_tool_entry(call))
                out.extend(self._frames_of(call.id or 0))
        return out

    def _frames_of(self, call_id: int) -> list[Entry]:
        out: list[Entry] = list(self.tasks.get(call_id, ()))
        for frame in self.children.get(call_id, []):
            out.append(AgentEntry(kind="agent", agent_id=frame.agent_id, depth=frame.depth))
            out.extend(self.entries(frame.id))
            out.append(AgentEntry(kind="agent_end", agent_id=frame.agent_id, depth=frame.depth))
        return out


def _from_source(source: SessionSource) -> sa.ColumnElement[bool]:
    if source != SessionSource.SUBAGENT:
        return col(ChatSession.source) == source
    deeper = select(col(StackFrame.session_id)).where(col(StackFrame.depth) > 0)
    return sa.or_(
        col(ChatSession.source) == source,
        col(ChatSession.id).in_(deeper),
        col(ChatSession.parent_call_id).is_not(None),
    )


def _read_page(tx: Session, source: SessionSource | None, page: int, per_page: int) -> SessionPage:
    counted = (
        select(
            col(HistoryRow.session_id),
            sa.func.count(col(HistoryRow.id)).label("n"),
            sa.func.max(col(HistoryRow.created_at)).label("last"),
        )
        .group_by(col(HistoryRow.session_id))
        .subquery()
    )
    query = select(ChatSession, counted.c.n, counted.c.last).outerjoin(
        counted, counted.c.session_id == col(ChatSession.id)
    )
    total_query = select(sa.func.count()).select_from(ChatSession)
    if source is not None:
        query = query.where(_from_source(source))
        total_query = total_query.where(_from_source(source))
    found = tx.exec(query.order_by(col(ChatSession.id).desc()).offset((page - 1) * per_page).limit(per_page))
    items = [
        SessionSummary(**_info(row).model_dump(), message_count=count or 0, last_message_at=last)
        for row, count, last in found.all()
    ]
    return SessionPage(items=items, total=tx.exec(total_query).one(), page=page, per_page=per_page)


def _node(row: ChatSession, depth: int) -> TreeNode:
    assert row.id is not None
    closed = _ended(row.source, row.active, row.closed_at)
    return TreeNode(
        id=row.id,
        parent_session_id=row.parent_session_id,
        depth=depth,
        name=_text(row.name),
        agent_id=row.agent_id,
        source=row.source,
        status=TreeStatus.CLOSED if closed else TreeStatus.ACTIVE,
        created_at=row.created_at,
    )


def _read_tree(tx: Session, session: ChatSession) -> tuple[list[TreeNode], bool]:
    """The spawn tree ``session`` is in (module docstring), each session after its parent."""
    assert session.id is not None
    root = session.root_session_id or session.id
    found = tx.exec(
        select(ChatSession)
        .where(sa.or_(col(ChatSession.id) == root, col(ChatSession.root_session_id) == root))
        .order_by(col(ChatSession.id))
        .limit(MAX_TREE + 1)
    ).all()
    rows = {row.id: row for row in found[:MAX_TREE]}
    rows.setdefault(session.id, session)  # past the cap: still shown
    children: dict[int | None, list[ChatSession]] = {}
    for row in rows.values():
        parent = row.parent_session_id if row.parent_session_id in rows else root
        children.setdefault(None if row.id == root or parent not in rows else parent, []).append(row)
    nodes: list[TreeNode] = []

    def walk(parent: int | None, depth: int) -> None:
        for row in children.get(parent, []):
            nodes.append(_node(row, depth))
            walk(row.id, depth + 1)

    walk(None, 0)
    return nodes, len(found) > MAX_TREE


def _mail_entry(row: MailRow) -> MailEntry:
    assert row.id is not None
    try:
        body = AgentMessageBody.model_validate(row.body)
        text, related = redact(body.text), body.relation
    except ValidationError:  # fail closed: shown as unreadable, never as whatever was stored
        text, related = "(this mail's body could not be read)", "peer"
    sender = row.sender_ref or ""
    return MailEntry(
        id=row.id,
        accepted_at=row.accepted_at,
        from_session_id=int(sender) if sender.isdigit() else None,
        to_session_id=row.session_id,
        relation=related,
        hops=row.hops,
        seq=row.seq,
        interrupt=row.priority == Priority.INTERRUPT,
        text=text,
    )


def _read_mail(tx: Session, session_id: int) -> tuple[list[MailEntry], bool]:
    """The newest mail between sessions that ``session_id`` sent or received, oldest first."""
    query = (
        select(MailRow)
        .where(
            col(MailRow.kind) == MailKind.AGENT_MESSAGE,
            col(MailRow.sender_kind) == SenderKind.SESSION,
            sa.or_(col(MailRow.session_id) == session_id, col(MailRow.sender_ref) == str(session_id)),
        )
        .order_by(col(MailRow.id).desc())
        .limit(MAX_MAIL + 1)
    )
    found = list(tx.exec(query).all())
    return [_mail_entry(row) for row in reversed(found[:MAX_MAIL])], len(found) > MAX_MAIL


def _session_entries(tx: Session, session_id: int, depth: int) -> list[Entry]:
    """A session's rows as the detail tree shows them; a task another session's call ran here
    (a sub-agent's session, :mod:`runtime.core.task_sessions`) follows that call, its depth one
    below the caller's."""
    rows = tx.exec(select(HistoryRow).where(HistoryRow.session_id == session_id).order_by(col(HistoryRow.id)))
    calls = list(
        tx.exec(
            select(ToolCallRow)
            .where(ToolCallRow.session_id == session_id)
            .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
        ).all()
    )
    frames = tx.exec(
        select(StackFrame).where(StackFrame.session_id == session_id).order_by(col(StackFrame.id))
    )
    tasks: dict[int, list[Entry]] = {}
    if depth < MAX_TASK_DEPTH:
        called = [call.id for call in calls if call.name == "execute_task" and call.id is not None]
        for child in tx.exec(select(ChatSession).where(col(ChatSession.parent_call_id).in_(called))).all():
            assert child.id is not None and child.parent_call_id is not None
            start = AgentEntry(kind="agent", agent_id=child.agent_id, depth=depth + 1, session_id=child.id)
            end = start.model_copy(update={"kind": "agent_end"})
            tasks[child.parent_call_id] = [start, *_session_entries(tx, child.id, depth + 1), end]
    return _Tree(list(rows.all()), calls, list(frames.all()), tasks).entries()


def _read_detail(tx: Session, session_id: int) -> SessionDetail | None:
    session = tx.get(ChatSession, session_id)
    if session is None:
        return None
    entries = _session_entries(tx, session_id, 0)
    tree, tree_truncated = _read_tree(tx, session)
    mail, mail_truncated = _read_mail(tx, session_id)
    return SessionDetail(
        session=_info(session),
        messages=entries,
        tree=tree,
        tree_truncated=tree_truncated,
        mail=mail,
        mail_truncated=mail_truncated,
    )


def _job_run(run: JobRun) -> JobRunInfo:
    assert run.id is not None
    return JobRunInfo(
        id=run.id,
        job_id=run.job_id,
        session_id=run.session_id,
        status=run.status,
        scheduled_for=run.scheduled_for,
        started_at=run.started_at,
        ended_at=run.ended_at,
        duration_ms=run.duration_ms,
        final_response=_text(run.final_response),
        error=_text(run.error),
    )


def _tic_run(run: TicRun) -> TicRunInfo:
    assert run.id is not None
    return TicRunInfo(
        id=run.id,
        session_id=run.session_id,
        status=run.status,
        started_at=run.started_at,
        ended_at=run.ended_at,
        delivered=run.delivered,
        reason=_text(run.reason),
    )


def _read_approvals(tx: Session) -> list[ApprovalInfo]:
    found = tx.exec(
        select(ApprovalRequestRow, ToolCallRow)
        .join(ToolCallRow, col(ToolCallRow.id) == col(ApprovalRequestRow.tool_call_id))
        .where(ApprovalRequestRow.status == ApprovalStatus.PENDING)
        .order_by(col(ApprovalRequestRow.created_at))
    )
    return [
        ApprovalInfo(
            id=request.id,
            session_id=request.session_id,
            tool=call.name,
            arguments=_arguments(call.arguments),
            created_at=request.created_at,
            expires_at=request.expires_at,
        )
        for request, call in found.all()
    ]


class DebugView:
    """The web view's queries; built by the runtime facade from the narrow parts it reads."""

    def __init__(
        self, db: Database, scheduler: SchedulerService, llm: LLMClient, *, lead: Lead | None = None
    ) -> None:
        self._db = db
        self._scheduler = scheduler
        self._llm = llm
        self._lead = lead
        """This instance's part in a cluster; ``None`` without one."""
        self._llm_state: tuple[float, State] | None = None

    async def sessions(
        self, source: SessionSource | None = None, page: int = 1, per_page: int = 20
    ) -> SessionPage:
        """Newest first; ``page`` counts from 1, ``per_page`` is capped at :data:`MAX_PER_PAGE`."""
        page, per_page = max(1, page), min(max(1, per_page), MAX_PER_PAGE)
        return await self._db.read_sync(lambda tx: _read_page(tx, source, page, per_page))

    async def session(self, session_id: int) -> SessionDetail | None:
        return await self._db.read_sync(lambda tx: _read_detail(tx, session_id))

    async def jobs(self) -> list[JobInfo]:
        rows = await self._db.read_sync(
            lambda tx: list(tx.exec(select(ScheduledJob).order_by(col(ScheduledJob.id))))
        )
        return [self._job(row) for row in rows]

    async def job(self, job_id: int) -> JobInfo | None:
        row = await self._db.read_sync(lambda tx: tx.get(ScheduledJob, job_id))
        return None if row is None else self._job(row)

    def _job(self, row: ScheduledJob) -> JobInfo:
        assert row.id is not None
        return JobInfo(
            id=row.id,
            title=redact(row.title),
            schedule=row.schedule,
            timezone=row.timezone,
            prompt=redact(row.prompt),
            chat_id=row.chat_id,
            thread_id=row.thread_id,
            enabled=row.enabled,
            running=self._scheduler.is_running(row.id),
            running_session_id=row.running_session_id,
            next_run_at=row.next_run_at,
            last_run_at=row.last_run_at,
        )

    async def job_runs(self, job_id: int | None = None, limit: int = 50) -> list[JobRunInfo]:
        """Newest first; every job's when ``job_id`` is ``None``."""
        query = select(JobRun).order_by(col(JobRun.id).desc()).limit(limit)
        if job_id is not None:
            query = query.where(JobRun.job_id == job_id)
        rows = await self._db.read_sync(lambda tx: list(tx.exec(query)))
        return [_job_run(run) for run in rows]

    async def tic_runs(self, limit: int = 50) -> list[TicRunInfo]:
        """Newest first."""
        query = select(TicRun).order_by(col(TicRun.id).desc()).limit(limit)
        rows = await self._db.read_sync(lambda tx: list(tx.exec(query)))
        return [_tic_run(run) for run in rows]

    async def approvals(self) -> list[ApprovalInfo]:
        """Every request still waiting for its decision, oldest first."""
        return await self._db.read_sync(_read_approvals)

    async def health(self, last_poll: Callable[[], float | None], started: float) -> Health:
        """``last_poll`` is the chat adapter's monotonic time of its last returned poll (``None``
        before the first); before it the adapter is starting for :data:`POLLING_DOWN_AFTER` from
        ``started``, then down."""
        polled = last_poll()
        since = time.monotonic() - (polled if polled is not None else started)
        if since <= POLLING_DOWN_AFTER:
            polling = State.OK if polled is not None else State.STARTING
        else:
            polling = State.DOWN
        db, llm = await asyncio.gather(self._db_state(), self._llm_health())
        status = State.DOWN if State.DOWN in (polling, db) else State.OK
        this = _this_instance(self._lead)
        return Health(status=status, polling=polling, llm=llm, db=db, instance=this.name, role=this.role)

    async def cluster(self) -> ClusterInfo:
        """This instance, every registered instance (live or dead), every lease and the leader;
        without a cluster only this process, as ``single``."""
        this = _this_instance(self._lead)
        if self._lead is None:
            return ClusterInfo(enabled=False, instance=this, instances=[], leases=[], leader=None)
        ttl = self._lead.settings.lease_ttl
        instances, leases = await self._db.read_sync(lambda tx: _read_cluster(tx, ttl))
        return ClusterInfo(
            enabled=True, instance=this, instances=instances, leases=leases, leader=_leader(instances, leases)
        )

    async def database_answers(self) -> bool:
        """The database answers a trivial read within 5 s (the webhook's 503 and ``/healthz``)."""
        return await self._db_state() == State.OK

    async def _db_state(self) -> State:
        try:
            await asyncio.wait_for(self._db.read_sync(lambda tx: tx.exec(select(sa.literal(1))).one()), 5.0)
        except Exception:
            log.warning("health check: the database does not answer", exc_info=True)
            return State.DOWN
        return State.OK

    async def _llm_health(self) -> State:
        now = time.monotonic()
        if self._llm_state is not None and now - self._llm_state[0] < LLM_PROBE_EVERY:
            return self._llm_state[1]
        try:
            answers = await asyncio.wait_for(self._llm.probe(), LLM_PROBE_TIMEOUT) is None
        except Exception:
            answers = False
        state = State.OK if answers else State.DOWN
        self._llm_state = (now, state)
        return state


__all__ = [
    "AgentEntry",
    "ApprovalInfo",
    "AssistantEntry",
    "ClusterInfo",
    "DebugView",
    "Entry",
    "Health",
    "InstanceInfo",
    "InstanceRole",
    "JobInfo",
    "JobRunInfo",
    "LeaseInfo",
    "MailEntry",
    "SessionDetail",
    "SessionInfo",
    "SessionPage",
    "SessionSource",
    "SessionSummary",
    "State",
    "ThisInstance",
    "TicRunInfo",
    "ToolEntry",
    "TreeNode",
    "TreeStatus",
    "UserEntry",
]
