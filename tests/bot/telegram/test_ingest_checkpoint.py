"""The update's offset reaches its handler as a value and comes back as a fact (issue 11).

The ingest loop offers the offset past the update in a context variable around
its ``process`` call; the handler whose mail stored it says so; nothing is shared
between updates, and the offset is gone once the update is handled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.ingest import Ingest, checkpoint_stored, offered_checkpoint
from agentgram.bot.telegram.drivers import Driver
from agentgram.runtime.app import Checkpoint


class _Values:
    async def get_value(self, key: str) -> str | None:
        return None

    async def set_value(self, key: str, value: str) -> None: ...
    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]:
        return {}


class _Runtime:
    values = _Values()

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None: ...


class _Handlers:
    """Runs ``handler`` in the calling task, as the dispatcher awaits each handler."""

    def __init__(self, handler: Callable[[], Awaitable[None]]) -> None:
        self.handler = handler
        self.seen: list[Checkpoint | None] = []

    async def process(self, update: Update) -> None:
        self.seen.append(offered_checkpoint())
        await self.handler()


def _ingest(driver: Driver, handlers: _Handlers) -> Ingest:
    return Ingest(driver.api, driver.parse, handlers.process, _Runtime(), poll_timeout=1)


def _update(driver: Driver, update_id: int) -> Update:
    return Update(update_id, driver.api)


async def _stores() -> None:
    checkpoint_stored()


async def _does_not_store() -> None:
    return None


async def _fails() -> None:
    raise RuntimeError("a handler's bug")


async def test_the_handler_sees_its_update_offset_and_says_it_stored_it(driver: Driver) -> None:
    handlers = _Handlers(_stores)
    checkpoint = Checkpoint("telegram.update_offset", "8")
    assert await _ingest(driver, handlers)._handle(_update(driver, 7), checkpoint) is True
    assert handlers.seen == [checkpoint]
    assert offered_checkpoint() is None, "the offer ends with the update"


async def test_an_offset_no_mail_stored_is_left_to_the_loop(driver: Driver) -> None:
    for handler in (_does_not_store, _fails):
        handlers = _Handlers(handler)
        checkpoint = Checkpoint("telegram.update_offset", "9")
        assert await _ingest(driver, handlers)._handle(_update(driver, 8), checkpoint) is False
        assert handlers.seen == [checkpoint] and offered_checkpoint() is None


async def test_each_update_gets_its_own_offset(driver: Driver) -> None:
    handlers = _Handlers(_stores)
    ingest = _ingest(driver, handlers)
    first, second = Checkpoint("k", "1"), Checkpoint("k", "2")
    assert await ingest._handle(_update(driver, 0), first) and await ingest._handle(
        _update(driver, 1), second
    )
    assert handlers.seen == [first, second]
