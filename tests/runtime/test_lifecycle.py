"""The runtime's lifecycle: ``async with Runtime(...)`` starts and closes it, and the one ordered
shutdown (scheduler → hub → adapters' close hooks → LLM client and database) runs once."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.app import Runtime
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def runtime(tmp_path: Path, fake_llm: FakeOpenAI) -> Runtime:
    return Runtime(make_settings(tmp_path, fake_llm.base_url), format_rules="")


def _firing(runtime: Runtime) -> bool:
    aps = runtime.parts.scheduler.engine.aps
    return aps is not None and aps.running


async def test_async_with_starts_the_runtime_and_closes_it(runtime: Runtime) -> None:
    async with runtime as entered:
        assert entered is runtime and not runtime.closed
        assert _firing(runtime)
        session, _ = await runtime.parts.session_store.find_or_open(
            ALLOWED_USER, user_id=ALLOWED_USER, language="en"
        )
        assert session.id is not None
        runtime.parts.hub.wake(session.id)  # a real worker, idle on an empty mailbox
        worker = runtime.parts.hub.workers[session.id]
    assert runtime.closed
    assert not _firing(runtime)
    assert runtime.parts.hub.workers == {} and worker.task.done()


async def test_close_hooks_run_after_the_hub_stopped_and_before_the_database_closes(
    runtime: Runtime,
) -> None:
    seen: list[tuple[bool, int, bool]] = []

    async def hook() -> None:
        session = await runtime.parts.session_store.find_or_open(
            ALLOWED_USER, user_id=ALLOWED_USER, language="en"
        )
        seen.append((_firing(runtime), len(runtime.parts.hub.workers), session[0].id is not None))

    runtime.on_close(hook)
    async with runtime:
        runtime.parts.hub.wake(1)
    assert seen == [(False, 0, True)]  # scheduler and hub stopped, the database still open


async def test_closing_twice_shuts_down_once(runtime: Runtime) -> None:
    calls: list[str] = []

    async def hook() -> None:
        calls.append("closed")

    runtime.on_close(hook)
    async with runtime:
        pass
    runtime.parts.scheduler.engine.start(runtime.timezone, 1.0)  # would be stopped again by a second shutdown
    try:
        await runtime.close()
        assert _firing(runtime)  # the second close did nothing
        assert calls == ["closed"]
    finally:
        await runtime.parts.scheduler.engine.stop()


async def test_a_failing_close_hook_still_closes_the_runtime(runtime: Runtime) -> None:
    async def broken() -> None:
        raise RuntimeError("adapter failed to drain")

    runtime.on_close(broken)
    with pytest.raises(RuntimeError, match="drain"):
        async with runtime:
            pass
    assert runtime.closed and not _firing(runtime)
    await runtime.close()  # and it is not retried
