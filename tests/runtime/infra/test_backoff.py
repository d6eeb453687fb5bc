"""The one backoff helper: its delays, and its retry loop."""

from __future__ import annotations

from types import FunctionType

import pytest

from agentgram.runtime.infra.backoff import Backoff, retrying
from tests.runtime.infra.cycles import cyclic_garbage


def test_delays_double_from_initial_up_to_the_cap() -> None:
    assert [Backoff(0.5, 4.0).next_delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    delays = Backoff(1.0, 60.0).delays()
    assert [next(delays) for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_another_multiplier_no_cap_and_zero() -> None:
    assert [Backoff(1.0, multiplier=3).next_delay(n) for n in (1, 2, 3)] == [1, 3, 9]
    assert Backoff(0.001).next_delay(1000) > 1e6  # uncapped, and no overflow
    assert Backoff(0.0, 5.0).next_delay(3) == 0.0


def test_jitter_spreads_each_delay_within_its_fraction() -> None:
    backoff = Backoff(10.0, 10.0, jitter=0.2)
    delays = [backoff.next_delay(4) for _ in range(300)]
    assert all(8.0 <= d <= 12.0 for d in delays)
    assert len(set(delays)) > 1


async def test_retrying_retries_what_it_is_told_then_returns() -> None:
    calls, waits = [], []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ValueError(len(calls))
        return "ok"

    def retried(attempt: int, error: BaseException, delay: float) -> None:
        waits.append((attempt, str(error), delay))

    result = await retrying(
        flaky,
        Backoff(0.01, 0.015),
        attempts=5,
        retry_if=lambda e: isinstance(e, ValueError),
        on_retry=retried,
    )
    assert result == "ok"
    assert waits == [(1, "1", 0.01), (2, "2", 0.015)]


async def test_retrying_raises_the_last_failure_and_the_unaccepted_at_once() -> None:
    calls: list[int] = []

    async def failing() -> None:
        calls.append(1)
        raise KeyError(len(calls))

    with pytest.raises(KeyError, match="2"):
        await retrying(failing, Backoff(0.0), attempts=2, retry_if=lambda e: True)
    calls.clear()
    with pytest.raises(KeyError, match="1"):
        await retrying(failing, Backoff(0.0), attempts=None, retry_if=lambda e: False)


async def test_a_failure_that_names_its_wait_waits_that() -> None:
    waits: list[float] = []
    calls: list[int] = []

    async def limited() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("wait 0.02")
        return len(calls)

    assert (
        await retrying(
            limited,
            Backoff(5.0),
            attempts=None,
            retry_if=lambda e: True,
            wait_for=lambda e: 0.02,
            on_retry=lambda attempt, error, delay: waits.append(delay),
        )
        == 2
    )
    assert waits == [0.02]


async def test_a_call_under_retrying_leaves_no_reference_cycle() -> None:
    """Every chat send runs under ``retrying``: what it built must go when it returns, not wait
    for the cyclic collector (a tenacity runner keeps bound methods of itself)."""
    failed: list[int] = []

    async def once_flaky() -> str:
        if not failed:
            failed.append(1)
            raise ValueError("again")
        return "ok"

    async def call() -> str:
        failed.clear()
        return await retrying(once_flaky, Backoff(0.0), attempts=3, retry_if=lambda e: True)

    await call()  # whatever the first call caches
    with cyclic_garbage() as found:
        for _ in range(5):
            assert await call() == "ok"
    garbage = [type(o).__name__ for o in found if type(o).__module__.startswith("tenacity")]
    closures = [o.__qualname__ for o in found if isinstance(o, FunctionType)]
    assert garbage == [] and not any("retrying" in name for name in closures)
