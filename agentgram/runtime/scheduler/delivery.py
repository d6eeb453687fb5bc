"""Sending a run's result to its chat, as quiet hours allow.

A result goes out as a :class:`~runtime.events.Report` — silently during
quiet hours, or held for one digest per chat when they end
(``quiet_hours.hold``). A job made in a forum topic reports to that topic
(its ``thread_id``), held or not: the digest is one per chat and topic, so
each topic's results stay in their topic. Held results survive a restart
(:class:`~runtime.scheduler.held.HeldReports`), so the flush is rescheduled
on start. The report says what it is; the adapter words it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from apscheduler.triggers.date import DateTrigger

from agentgram.runtime.infra.events import Address, CronResult, Digest, Report
from agentgram.runtime.infra.storage.models import SessionSource
from agentgram.runtime.scheduler.held import HeldReports
from agentgram.runtime.scheduler.part import Part, Shared
from agentgram.runtime.scheduler.plan import HeldReport, Hold, plan_delivery

FLUSH_JOB = "held-flush"


class Delivery(Part):
    def __init__(self, shared: Shared, held: HeldReports) -> None:
        super().__init__(shared)
        self.held = held

    async def deliver(
        self,
        chat_id: int,
        result: CronResult,
        *,
        thread_id: int,
        session_id: int | None,
        language: str | None,
    ) -> None:
        """Send ``result`` to the chat's topic ``thread_id`` (0: the chat itself), or hold it."""
        plan = plan_delivery(self.clock.now(), self.ports.quiet_hours, self.ports.timezone)
        if isinstance(plan, Hold):
            held = HeldReport(chat_id=chat_id, thread_id=thread_id, result=result, language=language)
            await self.held.add(held)
            await self.schedule_flush(plan.until)
            return
        to = address(session_id or 0, SessionSource.CRON, chat_id, language, thread_id=thread_id)
        await self.ports.publish(Report(to=to, content=result, silent=plan.silent))

    async def held_until(self) -> datetime | None:
        """When held results should go out: now if any are held, else never."""
        return self.clock.now() if await self.held.all() else None

    async def schedule_flush(self, when: datetime | None) -> None:
        aps = self.engine.aps
        if aps is None or when is None:
            return
        aps.add_job(
            self._flush_held,
            DateTrigger(run_date=when + timedelta(seconds=1)),
            id=FLUSH_JOB,
            name="held results",
            replace_existing=True,
            misfire_grace_time=None,
        )

    async def flush_held(self) -> int:
        """Send what quiet hours held, one digest per chat and topic; how many results went out.

        Still quiet (a restart, a clock jump): keep holding until the period ends.
        """
        plan = plan_delivery(self.clock.now(), self.ports.quiet_hours, self.ports.timezone)
        if isinstance(plan, Hold):
            await self.schedule_flush(plan.until)
            return 0
        reports = await self.held.take()
        places: dict[tuple[int, int], list[HeldReport]] = {}
        for report in reports:
            places.setdefault((report.chat_id, report.thread_id), []).append(report)
        for (chat_id, thread_id), items in places.items():
            to = address(0, SessionSource.CRON, chat_id, items[-1].language, thread_id=thread_id)
            digest = Digest(items=tuple(item.result for item in items))
            await self.ports.publish(Report(to=to, content=digest))
        return len(reports)

    async def _flush_held(self) -> None:
        await self.flush_held()


def address(
    session_id: int, source: str, chat_id: int, language: str | None, *, thread_id: int = 0
) -> Address:
    """Where a scheduled run's report goes: its chat and, in a forum, its topic (0: none)."""
    return Address(
        session_id=session_id, source=source, chat_id=chat_id, language=language, thread_id=thread_id
    )
