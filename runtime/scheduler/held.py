"""Results held during quiet hours (``quiet_hours.hold: true``), kept across restarts.

They live as one JSON list in the key-value table, so a restart in the night
still sends the digest in the morning. Reads and writes are whole-list: the
list is short (one night's cron results) and only the scheduler touches it.
"""

from __future__ import annotations

import json

from agentgram.runtime.scheduler.plan import HeldReport
from agentgram.runtime.storage.sessions import SessionStore

KEY = "scheduler.held_reports"


class HeldReports:
    def __init__(self, store: SessionStore) -> None:
        self._store = store

    async def add(self, report: HeldReport) -> None:
        reports = await self.all()
        reports.append(report)
        await self._save(reports)

    async def all(self) -> list[HeldReport]:
        raw = await self._store.get_value(KEY)
        if not raw:
            return []
        try:
            items = json.loads(raw)
        except json.JSONDecodeError:
            return []
        return [
            HeldReport(
                chat_id=int(item["chat_id"]),
                title=str(item["title"]),
                text=str(item["text"]),
                language=item.get("language"),
            )
            for item in items
            if isinstance(item, dict) and {"chat_id", "title", "text"} <= item.keys()
        ]

    async def take(self) -> list[HeldReport]:
        """Every held report, oldest first, and forget them."""
        reports = await self.all()
        if reports:
            await self._save([])
        return reports

    async def _save(self, reports: list[HeldReport]) -> None:
        data = [
            {"chat_id": r.chat_id, "title": r.title, "text": r.text, "language": r.language} for r in reports
        ]
        await self._store.set_value(KEY, json.dumps(data, ensure_ascii=False))
