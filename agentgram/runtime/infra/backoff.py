"""The one backoff helper: how long to wait before the next try, and a retry loop built on it.

Every retry loop in agentgram waits by this module (a chat adapter's sends and polling, the LLM
client and its start-up probe, MCP server restarts, the tools' ``retries`` wrapper), so
"capped exponential with jitter" is written once. A :class:`Backoff` is a plain value:
``initial`` seconds after the first failure, times ``multiplier`` after each further one, never
more than ``max``, each delay spread by ``±jitter`` (a fraction) so that callers failing
together do not retry together. :func:`retrying` runs a call under such a backoff with
tenacity, for loops that need no more than "retry these errors, so many times".

Every chat send runs under :func:`retrying`, so it must leave no garbage: a tenacity runner keeps
its last actions, bound methods of itself, in its per-thread state, which made each call a
reference cycle of some 30 objects that only the cyclic collector freed. On the hot path that was
most of the process's cyclic garbage, and its oldest generation's growth between full collections
set the high-water mark of the heap (``bench/README.md``, session 22). The runner's state is reset
when the call ends.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import tenacity

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential delays: ``initial × multiplierⁿ⁻¹`` for the n-th, at most ``max``."""

    initial: float
    max: float = math.inf
    multiplier: float = 2.0
    jitter: float = 0.0
    """Each delay is scaled by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def next_delay(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failure (1 for the first)."""
        try:
            base = min(self.initial * self.multiplier ** (max(attempt, 1) - 1), self.max)
        except OverflowError:  # a huge attempt count: the cap it would have reached long ago
            base = self.max
        return base * random.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else base

    def delays(self) -> Iterator[float]:
        """The delays after the first, second, … failure, without end."""
        return (self.next_delay(attempt) for attempt in itertools.count(1))


OnRetry = Callable[[int, BaseException, float], None]
"""``on_retry(attempt, error, delay)``: called before each wait (the attempt that failed)."""


async def retrying(
    call: Callable[[], Awaitable[T]],
    backoff: Backoff,
    *,
    attempts: int | None,
    retry_if: Callable[[BaseException], bool],
    wait_for: Callable[[BaseException], float | None] = lambda error: None,
    on_retry: OnRetry | None = None,
) -> T:
    """Run ``call`` until it returns, retrying the failures ``retry_if`` accepts.

    ``attempts`` caps the tries (``None``: no cap); the last failure, or one not accepted,
    is raised as it is. A failure that names its own wait (``wait_for`` gives seconds, a 429's
    ``retry_after``) waits that instead of the backoff. Only exceptions are retried, never a
    cancellation.
    """

    def wait(state: tenacity.RetryCallState) -> float:
        error = _error(state)
        named = wait_for(error)
        return named if named is not None else backoff.next_delay(state.attempt_number)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None:
            assert state.next_action is not None
            on_retry(state.attempt_number, _error(state), state.next_action.sleep)

    async def attempt() -> T:  # a coroutine function: tenacity calls any other without awaiting it
        return await call()

    stop = tenacity.stop_never if attempts is None else tenacity.stop_after_attempt(attempts)
    runner = tenacity.AsyncRetrying(
        stop=stop,
        wait=wait,
        retry=tenacity.retry_if_exception(lambda error: isinstance(error, Exception) and retry_if(error)),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return await runner(attempt)
    finally:
        runner.iter_state.reset()  # its actions are the runner's bound methods: a cycle otherwise


def _error(state: tenacity.RetryCallState) -> BaseException:
    assert state.outcome is not None
    error = state.outcome.exception()
    assert error is not None
    return error


__all__ = ["Backoff", "OnRetry", "retrying"]
