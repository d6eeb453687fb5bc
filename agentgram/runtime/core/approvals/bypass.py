"""Session bypasses: "trust this kind of call for a while", in memory only.

A bypass turns a ``require`` into ``allow`` for one session until it
expires; it never overrides ``deny``. ``/stop``, ``/new`` and a restart
clear it (it is deliberately not persisted).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agentgram.runtime.capabilities.tools.base import ToolGroup


@dataclass(slots=True, frozen=True)
class Bypass:
    scope: str  # "all" | "@<group>" | a tool name
    expires_at: datetime

    def covers(self, tool: str, group: ToolGroup) -> bool:
        return self.scope == "all" or self.scope == f"@{group.value}" or self.scope == tool


class BypassTable:
    def __init__(self) -> None:
        self._by_session: dict[int, list[Bypass]] = {}

    def grant(self, session_id: int, scope: str, now: datetime, duration: timedelta) -> Bypass:
        bypass = Bypass(scope=scope, expires_at=now + duration)
        kept = [b for b in self.active(session_id, now) if b.scope != scope]
        self._by_session[session_id] = [*kept, bypass]
        return bypass

    def active(self, session_id: int, now: datetime) -> list[Bypass]:
        live = [b for b in self._by_session.get(session_id, []) if b.expires_at > now]
        self._by_session[session_id] = live
        return live

    def covers(self, session_id: int, tool: str, group: ToolGroup, now: datetime) -> bool:
        return any(b.covers(tool, group) for b in self.active(session_id, now))

    def revoke(self, session_id: int, scope: str) -> bool:
        before = self._by_session.get(session_id, [])
        self._by_session[session_id] = [b for b in before if b.scope != scope]
        return len(before) != len(self._by_session[session_id])

    def clear(self, session_id: int) -> None:
        self._by_session.pop(session_id, None)
