"""The access list's rules without Telegram: who is allowed, who decides, the cap, fail-closed values."""

from __future__ import annotations

from agentgram.bot.telegram.core.access_list import (
    APPROVED_PREFIX,
    MAX_OPEN_REQUESTS,
    REQUEST_PREFIX,
    AccessList,
    RequestStatus,
)


class MemoryStore:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get_value(self, key: str) -> str | None:
        return self.values.get(key)

    async def set_value(self, key: str, value: str) -> None:
        self.values[key] = value

    async def values_with_prefix(self, prefix: str) -> dict[str, str]:
        return {k: v for k, v in self.values.items() if k.startswith(prefix)}


async def test_an_approved_user_is_allowed_after_a_reload_but_never_decides() -> None:
    store = MemoryStore()
    access = AccessList([1, 2], store)
    await access.load()
    request = await access.new_request(9, "@eve", "en")
    assert request is not None and not access.allowed(9)
    await access.save(request)
    assert await access.pending(9, "WRONG1") is None  # a button must name the request's code
    found = await access.pending(9, request.code)
    assert found is not None
    await access.approve(found, by=1)
    assert access.allowed(9)
    decided = await access.request(9)
    assert decided is not None and decided.status == RequestStatus.APPROVED
    reloaded = AccessList([1, 2], store)
    await reloaded.load()
    assert reloaded.allowed(9) and reloaded.allowed(2) and not reloaded.allowed(3)
    assert reloaded.owner == 1 and reloaded.decides(2) and not reloaded.decides(9)
    assert await reloaded.pending(9, request.code) is None  # decided: the button is stale


async def test_open_requests_are_capped() -> None:
    access = AccessList([1], MemoryStore())
    for user_id in range(100, 100 + MAX_OPEN_REQUESTS):
        request = await access.new_request(user_id, "x", None)
        assert request is not None
        await access.save(request)
    assert await access.new_request(999, "x", None) is None


async def test_an_unreadable_request_reads_as_none() -> None:
    store = MemoryStore()
    store.values[REQUEST_PREFIX + "9"] = "{not json"
    store.values[APPROVED_PREFIX + "8"] = "{}"
    access = AccessList([1], store)
    await access.load()
    assert await access.request(9) is None
    assert access.allowed(8)
