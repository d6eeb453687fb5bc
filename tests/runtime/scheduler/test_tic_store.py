import pytest

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.models import TicRunStatus
from agentgram.runtime.scheduler.tic import SkipNothingToDo
from agentgram.runtime.scheduler.tic_store import TicStore


@pytest.fixture
def tics(db: Database, clock: FakeClock) -> TicStore:
    return TicStore(db, clock)


async def test_records_decisions_and_reports_the_last(tics: TicStore, clock: FakeClock) -> None:
    assert await tics.last() is None
    skipped = SkipNothingToDo()
    await tics.record(skipped.status, reason=skipped.reason)
    last = await tics.last()
    assert last is not None
    assert (last.status, last.reason, last.delivered, last.ended_at) == (
        "skipped",
        "nothing to do",
        False,
        clock.now(),
    )

    clock.advance(1800)
    ran = await tics.record(TicRunStatus.RAN, session_id=3)
    assert ran is not None and ran.id is not None and ran.ended_at is None
    clock.advance(12)
    await tics.finish(ran.id, delivered=True)
    last = await tics.last()
    assert last is not None
    assert (last.status, last.delivered, last.session_id, last.ended_at) == ("ran", True, 3, clock.now())

    failed = await tics.record(TicRunStatus.RAN)
    assert failed is not None and failed.id is not None
    await tics.finish(failed.id, delivered=False, failed=True, reason="LLM unavailable")
    last = await tics.last()
    assert last is not None and (last.status, last.reason) == ("failed", "LLM unavailable")


async def test_overrides_default_to_the_config_and_can_be_cleared(tics: TicStore) -> None:
    state = await tics.state()
    assert (state.enabled, state.interval_seconds, state.cron) == (None, None, None)
    await tics.set_state(enabled=False)
    await tics.set_state(interval_seconds=2700.0)
    state = await tics.state()
    assert (state.enabled, state.interval_seconds) == (False, 2700.0)
    await tics.set_state(enabled=None)
    state = await tics.state()
    assert (state.enabled, state.interval_seconds) == (None, 2700.0)
