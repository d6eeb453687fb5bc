"""The approval service: rules, pending requests, decisions, bypasses.

A pending request is a database row bound to one tool call; its opaque id
is what the chat adapter puts in button data, so buttons keep working across
restarts. A decision applies once: ``pending`` → decided is one compare-and-set
statement (``UPDATE … WHERE status = 'pending' RETURNING``), so of concurrent
decisions (two taps, a tap and the timeout, two processes) exactly one applies
and the others find the row decided and are reported stale. Opening a call's
request locks the call's row first, so concurrent openers share one request. Waiters are
in-memory futures woken by the decision; after a restart the resumed gate
reads the stored decision instead. Which request a session's turn waits on
right now is its session worker's to say (``SessionHub.awaited``), not this
manager's.
"""

from __future__ import annotations

import asyncio
import enum
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Session, col, delete, select

from agentgram.runtime.core.approvals.bypass import Bypass, BypassTable
from agentgram.runtime.core.approvals.rules import SEEDED_RULES, Action, CallFacts, Rule, decide
from agentgram.runtime.infra.config import ApprovalSettings
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.metrics import APPROVAL_DECISIONS, APPROVAL_TRUST
from agentgram.runtime.infra.storage.concurrency import advisory_lock, lock_rows
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ApprovalRuleRow,
    ApprovalStatus,
    ToolCallRow,
    utcnow,
)
from agentgram.runtime.infra.storage.rows import table_of

log = get_logger("approvals")
_REQUESTS = table_of(ApprovalRequestRow)
_RULES = table_of(ApprovalRuleRow)
_CALLS = table_of(ToolCallRow)
RULES_LOCK = int.from_bytes(b"agrules")
"""The PostgreSQL advisory lock :meth:`ApprovalManager.load_rules` holds: starts replace the
seeded rules one after another, never both adding theirs."""


class DecidedBy(enum.StrEnum):
    """How an approval was settled, for the operator's log line."""

    BUTTON = "button"
    REPLY = "reply"
    TIMEOUT = "timeout"
    STOP = "stop"
    UNSHOWN = "unshown"  # the prompt could not be shown
    REPLAYED = "replayed"  # a stored decision applied again after a restart
    RULE = "rule"
    AUTO_DENY = "auto-deny"  # headless: what would need approval is refused


PROMPT_NOT_SHOWN = "the approval prompt could not be shown in the chat"
"""The stored reason of a request :meth:`ApprovalManager.expire_unshown` settled."""


@dataclass(slots=True, frozen=True)
class DecisionResult:
    """What a button press or reply achieved."""

    applied: bool
    status: ApprovalStatus
    request: ApprovalRequestRow | None


class ApprovalManager:
    def __init__(self, db: Database, settings: ApprovalSettings) -> None:
        self._db = db
        self._settings = settings
        self._rules: list[Rule] = []
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self.bypasses = BypassTable()

    # --- rules ---------------------------------------------------------------

    async def load_rules(self) -> None:
        """Replace the seeded and the configured rules with this version's and this file's; cache all.

        Saved ("Always") rules are kept. Seeds are rewritten on every start so a
        changed default takes effect after an upgrade.
        """
        configured = [Rule(origin="config", **rule.model_dump()) for rule in self._settings.rules]

        def replace(tx: Session) -> None:
            advisory_lock(tx.connection(), RULES_LOCK)
            tx.exec(delete(ApprovalRuleRow).where(col(ApprovalRuleRow.origin).in_(("seed", "config"))))
            tx.add_all(_row(rule) for rule in (*SEEDED_RULES, *configured))

        await self._db.write_orm(replace)
        await self._refresh()

    async def reload(self) -> None:
        """Read the rules again: another instance of a cluster may have saved one ("Always")."""
        await self._refresh()

    async def _refresh(self) -> None:
        async with self._db.read() as tx:
            rows = (await tx.exec(select(ApprovalRuleRow))).all()
        self._rules = [_rule(row) for row in rows]

    def rules(self) -> list[Rule]:
        return list(self._rules)

    async def add_rule(self, rule: Rule) -> Rule:
        async with self._db.write() as tx:
            row = _row(rule)
            tx.add(row)
            await tx.flush()
        if rule.origin == "user":  # a rule the user saved ("Always"), not a seed
            APPROVAL_TRUST.labels(kind="always").inc()
        await self._refresh()
        return _rule(row)

    async def delete_rule(self, rule_id: int) -> bool:
        """Delete a rule the user saved (seeded and configured rules stay); whether one was."""
        gone = sa.delete(_RULES).where(_RULES.c.id == rule_id, _RULES.c.origin == "user")
        if not await self._db.write_sync(lambda tx: tx.execute(gone).rowcount > 0):
            return False
        await self._refresh()
        return True

    def check(self, session_id: int, facts: CallFacts, now: datetime | None = None) -> Action:
        """The rules' answer, with a ``require`` lifted by the session's bypass (``deny`` never is)."""
        action, _ = decide(self._rules, facts)
        if action == Action.REQUIRE and self.bypasses.covers(
            session_id, facts.tool, facts.group, now or utcnow()
        ):
            return Action.ALLOW
        return action

    def grant_bypass(self, session_id: int, scope: str) -> Bypass:
        """Trust ``scope`` in this session for ``approval.bypass_duration``."""
        duration = timedelta(seconds=self._settings.bypass_duration)
        APPROVAL_TRUST.labels(kind="session").inc()
        return self.bypasses.grant(session_id, scope, utcnow(), duration)

    # --- requests ------------------------------------------------------------

    async def request_for_call(
        self, session_id: int, tool_call_id: int, chat_id: int | None
    ) -> tuple[ApprovalRequestRow, bool]:
        """The call's request, opened if none exists; ``True`` when newly opened. The call's row
        is locked first, so of concurrent openers one opens and the others find its request."""

        def open_request(tx: Session) -> tuple[ApprovalRequestRow, bool]:
            lock_rows(tx.connection(), _CALLS, [tool_call_id])
            existing = tx.exec(
                select(ApprovalRequestRow)
                .where(ApprovalRequestRow.tool_call_id == tool_call_id)
                .order_by(col(ApprovalRequestRow.created_at).desc())
            ).first()
            if existing is not None and existing.status in (
                ApprovalStatus.PENDING,
                ApprovalStatus.APPROVED,
                ApprovalStatus.REJECTED,
            ):
                return existing, False
            expires = utcnow() + timedelta(seconds=self._settings.timeout) if self._settings.timeout else None
            row = ApprovalRequestRow(
                id=secrets.token_urlsafe(9),
                session_id=session_id,
                tool_call_id=tool_call_id,
                chat_id=chat_id,
                expires_at=expires,
            )
            tx.add(row)
            return row, True

        return await self._db.write_orm(open_request)

    async def get(self, request_id: str) -> ApprovalRequestRow | None:
        async with self._db.read() as tx:
            return await tx.get(ApprovalRequestRow, request_id)

    async def attach_message(self, request_id: str, chat_id: int, message_id: int) -> None:
        attach = (
            sa.update(_REQUESTS)
            .where(_REQUESTS.c.id == request_id)
            .values(chat_id=chat_id, message_id=message_id)
        )
        await self._db.write_sync(lambda tx: tx.execute(attach))

    async def by_message(self, chat_id: int, message_id: int) -> ApprovalRequestRow | None:
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(ApprovalRequestRow).where(
                    ApprovalRequestRow.chat_id == chat_id, ApprovalRequestRow.message_id == message_id
                )
            )
            return rows.first()

    async def pending(self, session_id: int | None = None) -> list[ApprovalRequestRow]:
        async with self._db.read() as tx:
            query = select(ApprovalRequestRow).where(ApprovalRequestRow.status == ApprovalStatus.PENDING)
            if session_id is not None:
                query = query.where(ApprovalRequestRow.session_id == session_id)
            return list((await tx.exec(query.order_by(col(ApprovalRequestRow.created_at)))).all())

    async def decide(
        self, request_id: str, approved: bool, reason: str | None = None, *, how: DecidedBy = DecidedBy.BUTTON
    ) -> DecisionResult:
        """Apply the user's decision; ``how`` (button, reply) is for the log line."""
        status = ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED
        return await self._transition(request_id, status, reason, how)

    async def _transition(
        self, request_id: str, status: ApprovalStatus, reason: str | None, how: DecidedBy
    ) -> DecisionResult:
        row, applied, tool = await self._db.write_sync(
            lambda tx: _compare_and_set(tx, request_id, status, reason)
        )
        if row is None:
            return DecisionResult(applied=False, status=ApprovalStatus.EXPIRED, request=None)
        if not applied:
            if row.status != ApprovalStatus.PENDING:
                # decided already, maybe by another process (a cluster's instance that stored the
                # decision): a gate waiting here reads the stored decision
                self._wake(request_id)
            return DecisionResult(applied=False, status=ApprovalStatus(row.status), request=row)
        log_decision(request_id, tool or "?", status, how, row.session_id)
        self._wake(request_id)
        return DecisionResult(applied=True, status=status, request=row)

    async def expire(self, request_id: str) -> DecisionResult:
        return await self._transition(request_id, ApprovalStatus.EXPIRED, None, DecidedBy.TIMEOUT)

    async def expire_unshown(self, request_id: str) -> DecisionResult:
        """Expire a request whose prompt the chat adapter could not show.

        Nobody can decide what they cannot see, so waiting out ``approval.timeout``
        (unbounded by default) would only hang the turn. Expired rather than
        rejected: the user refused nothing. The reason stays on the row, and the
        model reads it (``texts.expiry_message``).
        """
        return await self._transition(request_id, ApprovalStatus.EXPIRED, PROMPT_NOT_SHOWN, DecidedBy.UNSHOWN)

    async def cancel_session(self, session_id: int) -> list[ApprovalRequestRow]:
        """Cancel every pending request of a session (``/stop``); returns those cancelled."""
        cancelled = []
        for row in await self.pending(session_id):
            result = await self._transition(row.id, ApprovalStatus.CANCELLED, None, DecidedBy.STOP)
            if result.applied and result.request is not None:
                cancelled.append(result.request)
        return cancelled

    async def wait(self, request_id: str) -> ApprovalRequestRow:
        """Block until the request is decided, cancelled or expired (``approval.timeout``).

        The wake-up is registered *before* the row is read, so a decision that
        lands while the read is in flight is never missed.
        """
        while True:
            woken = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(request_id, set()).add(woken)
            try:
                row = await self.get(request_id)
                if row is None:
                    raise LookupError(request_id)
                if row.status != ApprovalStatus.PENDING:
                    return row
                try:
                    await asyncio.wait_for(woken, _seconds_until(row.expires_at))
                except TimeoutError:
                    await self.expire(request_id)
            finally:
                self._forget(request_id, woken)

    def _wake(self, request_id: str) -> None:
        for woken in self._waiters.pop(request_id, set()):
            if not woken.done():
                woken.set_result(None)

    def _forget(self, request_id: str, woken: asyncio.Future[None]) -> None:
        waiting = self._waiters.get(request_id)
        if waiting is not None:
            waiting.discard(woken)
            if not waiting:
                del self._waiters[request_id]


def log_decision(request_id: str | None, tool: str, decision: str, how: DecidedBy, session_id: int) -> None:
    """The operator's one INFO line per approval decision (a rule's decisions have no request),
    and its count in ``agentgram_approval_decisions_total``."""
    APPROVAL_DECISIONS.labels(decision=decision, how=how).inc()
    log.info(
        "approval %s tool=%s decision=%s how=%s session=%s",
        request_id or "-",
        tool,
        decision,
        how,
        session_id,
        extra={"request": request_id, "tool": tool, "decision": decision, "how": how, "session": session_id},
    )


def _compare_and_set(
    tx: Connection, request_id: str, status: ApprovalStatus, reason: str | None
) -> tuple[ApprovalRequestRow | None, bool, str | None]:
    """Decide the request if it is still pending, in one statement: the row as it stands,
    whether this decision applied, and (if it did) the call's tool name."""
    decided = tx.execute(
        sa.update(_REQUESTS)
        .where(_REQUESTS.c.id == request_id, _REQUESTS.c.status == ApprovalStatus.PENDING)
        .values(status=status, reason=reason, decided_at=utcnow())
        .returning(*_REQUESTS.c)
    ).first()
    if decided is None:
        found = tx.execute(sa.select(_REQUESTS).where(_REQUESTS.c.id == request_id)).first()
        return (None if found is None else ApprovalRequestRow(**found._mapping)), False, None
    tool = tx.execute(sa.select(_CALLS.c.name).where(_CALLS.c.id == decided.tool_call_id)).scalar()
    return ApprovalRequestRow(**decided._mapping), True, tool


def _seconds_until(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return max(0.0, (moment - utcnow()).total_seconds())


def _row(rule: Rule) -> ApprovalRuleRow:
    return ApprovalRuleRow(
        tool=rule.tool,
        path=rule.path,
        action=rule.action,
        priority=rule.priority,
        source=rule.source,
        note=rule.note,
        origin=rule.origin,
    )


def _rule(row: ApprovalRuleRow) -> Rule:
    return Rule(
        tool=row.tool,
        action=Action(row.action),
        path=row.path,
        priority=row.priority,
        source=row.source,
        note=row.note,
        id=row.id or 0,
        origin=row.origin,
    )
