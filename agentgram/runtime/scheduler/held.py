"""Results held during quiet hours (``quiet_hours.hold: true``), kept across restarts.

They live as one JSON list in the key-value table, so a restart in the night
still sends the digest in the morning. Reads and writes are whole-list: the
list is short (one night's cron results) and only the scheduler touches it.
Each item carries its result as structured content (the one codec,
:data:`~runtime.events.REPORT_CONTENT`) and the forum topic it goes to
(``thread_id``; an item held before topics were kept has none and goes to the
chat itself, 0); an item held by an older release, stored already worded, is
dropped and logged.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from agentgram.runtime.infra.events import REPORT_CONTENT, CronResult
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.scheduler.plan import HeldReport

log = get_logger("scheduler")

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
        parsed = [_held(item) for item in items] if isinstance(items, list) else []
        return [report for report in parsed if report is not None]

    async def take(self) -> list[HeldReport]:
        """Every held report, oldest first, and forget them."""
        reports = await self.all()
        if reports:
            await self._save([])
        return reports

    async def _save(self, reports: list[HeldReport]) -> None:
        data = [
            {
                "chat_id": r.chat_id,
                "thread_id": r.thread_id,
                "language": r.language,
                "result": REPORT_CONTENT.dump_python(r.result, mode="json"),
            }
            for r in reports
        ]
        await self._store.set_value(KEY, json.dumps(data, ensure_ascii=False))


def _held(item: Any) -> HeldReport | None:
    try:
        result = REPORT_CONTENT.validate_python(item["result"])
        if not isinstance(result, CronResult):
            raise ValueError("only cron results are held")
        return HeldReport(
            chat_id=int(item["chat_id"]),
            thread_id=int(item.get("thread_id") or 0),
            result=result,
            language=item.get("language"),
        )
    except (KeyError, TypeError, ValueError, ValidationError):
        log.warning("dropping a held result stored in an older shape")
        return None
