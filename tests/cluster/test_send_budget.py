"""One bot, one Telegram budget (issue 27, item 10): three instances' send stacks on one real
PostgreSQL and one fake Bot API, each with its own Database (engine and pool), its own driver and
its own chat queues, as three processes have them (``make_driver`` with the cluster's shared
budget). A burst from all three to private chats and a group never shows Telegram more than the
budget, overall or in any chat, by the times the fake recorded; a 429 seen by one instance pauses
the others' calls to that chat (or, without a chat, to every chat). Each driver in turn. And the
adapter takes the budget from the runtime's door only in a cluster.

The limits are Telegram's shape at a quicker pace (:data:`LIMITS`), so the burst takes seconds.
The fake records a send when its request arrives: after the pacer let it go (at most
:data:`~tests.runtime.infra.test_send_budget.JITTER` after its reserved time) and an HTTP round
trip through the one event loop the three instances and the fake share (:data:`HTTP_JITTER`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentgram.bot.telegram.app import compose
from agentgram.bot.telegram.core.chat_queue import ALONE, QueuedBot
from agentgram.bot.telegram.core.port import BotCommand, RetryAfter, Text
from agentgram.bot.telegram.core.shared_budget import SharedBudget, TelegramLimits
from agentgram.bot.telegram.drivers import make_driver
from agentgram.runtime.infra.send_budget import PAUSE_CACHE, Rate, SendBudget
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from tests.backends import pg_database
from tests.conftest import DRIVERS, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, RecordedRequest
from tests.runtime.infra.test_send_budget import JITTER, budget_bound, most_within, warm

LIMITS = TelegramLimits(overall=Rate(20.0, burst=5), group=Rate(3.0, burst=3), private=Rate(4.0, burst=2))
PRIVATE_CHATS = (1001, 1002, 1003, 1004, 1005)
GROUP = -2001
HTTP_JITTER = 0.05
"""Seconds the HTTP leg, through one busy event loop, may add to a send's time at the fake."""
INSTANCES = 3
EACH = 3
"""Messages each instance sends to each chat in the burst."""


@pytest.fixture(params=DRIVERS)
def telegram_library(request: pytest.FixtureRequest) -> str:
    library: str = request.param
    return library


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        for chat in PRIVATE_CHATS:
            fake.add_chat(chat)
        fake.add_chat(GROUP, chat_type="group")
        yield fake


@pytest.fixture
async def instances(
    tmp_path: Path, tg: FakeTelegram, telegram_library: str
) -> AsyncIterator[list[QueuedBot]]:
    """Three instances' send stacks: a Database each on one PostgreSQL database, a driver each."""
    settings = make_settings(
        tmp_path, "http://127.0.0.1:9/v1", tg.root, telegram={"library": telegram_library}
    )
    async with pg_database() as url, AsyncExitStack() as stack:
        apis = []
        for n in range(INSTANCES):
            db = Database(url)
            stack.push_async_callback(db.close)
            if n == 0:
                await migrate(db)
            budget = SendBudget(db)
            api = make_driver(settings.telegram, SharedBudget(budget, LIMITS)).api
            stack.push_async_callback(api.close)
            await api.get_me()
            await warm(budget)
            await asyncio.gather(*(api.get_webhook_info() for _ in range(20)))  # its HTTP connections too
            apis.append(api)
        yield apis


async def _age_the_pause_reads() -> None:
    """An instance trusts what it read of the shared pauses for :data:`PAUSE_CACHE` (the promise:
    a 429 reaches every instance's chat queues within it; a send's take sees it at once): let the
    reads the instances made at start (``getMe``) age past it."""
    await asyncio.sleep(PAUSE_CACHE)


def _sent(tg: FakeTelegram, chat: int | None = None) -> list[RecordedRequest]:
    """The messages Telegram accepted (to ``chat``), in the order they arrived."""
    return [
        call
        for call in tg.calls("sendMessage")
        if call.status == 200 and (chat is None or int(call.params["chat_id"]) == chat)
    ]


async def test_three_instances_bursting_never_exceed_the_budget(
    instances: list[QueuedBot], tg: FakeTelegram
) -> None:
    chats = (*PRIVATE_CHATS, GROUP)
    sends = [
        instance.send_message(chat, Text(f"{n}.{chat}.{i}"))
        for n, instance in enumerate(instances)
        for chat in chats
        for i in range(EACH)
    ]
    started = time.monotonic()
    await asyncio.gather(*sends)
    took = time.monotonic() - started
    total = INSTANCES * len(chats) * EACH
    assert len(_sent(tg)) == total
    overall = LIMITS.overall
    assert took >= (total - overall.burst) / overall.per_second - 0.1, "one budget, not three"
    times = [call.time for call in _sent(tg)]
    for window in (0.5, 1.0, 2.0):
        assert most_within(times, window) <= budget_bound(overall, window + JITTER + HTTP_JITTER), (
            f"overall, {window}s"
        )
    for chat in chats:
        mine = [call.time for call in _sent(tg, chat)]
        assert len(mine) == INSTANCES * EACH
        rate = LIMITS.of_chat(chat)
        for window in (0.5, 1.0, 2.0):
            assert most_within(mine, window) <= budget_bound(rate, window + JITTER + HTTP_JITTER), (
                f"chat {chat}, {window}s"
            )


async def test_a_429_on_one_instance_pauses_that_chat_on_every_instance(
    instances: list[QueuedBot], tg: FakeTelegram
) -> None:
    first, second, third = instances
    one, two = PRIVATE_CHATS[:2]
    await _age_the_pause_reads()
    tg.fail_next("sendMessage", retry_after=1, when=lambda params: params.get("text") == "refused")
    with pytest.raises(RetryAfter):
        await first.send_message(one, Text("refused"))
    [refused] = [call for call in tg.calls("sendMessage") if call.status == 429]
    await asyncio.gather(
        second.send_chat_action(one, "typing"),  # takes no token: the chat queue's shared pause holds it
        second.send_message(one, Text("from the second")),
        third.send_message(one, Text("from the third")),
        third.send_message(two, Text("elsewhere")),
    )
    [elsewhere] = [call for call in _sent(tg, two)]
    assert elsewhere.time - refused.time < 0.5, "another chat does not wait"
    later = [*_sent(tg, one), *tg.calls("sendChatAction")]
    assert len(later) == 3
    assert all(call.time - refused.time >= 1.0 for call in later)


async def test_a_429_without_a_chat_pauses_every_chat_on_every_instance(
    instances: list[QueuedBot], tg: FakeTelegram
) -> None:
    first, second, third = instances
    await _age_the_pause_reads()
    tg.fail_next("setMyCommands", retry_after=1)
    with pytest.raises(RetryAfter):
        await first.set_my_commands([BotCommand("help", "help")])
    [refused] = tg.calls("setMyCommands")
    await asyncio.gather(
        second.send_message(PRIVATE_CHATS[0], Text("one")),
        third.send_message(GROUP, Text("two")),
        third.send_chat_action(PRIVATE_CHATS[1], "typing"),
    )
    later = [*_sent(tg), *tg.calls("sendChatAction")]
    assert len(later) == 3
    assert all(call.time - refused.time >= 1.0 for call in later)


@pytest.mark.parametrize("library", DRIVERS)
async def test_the_adapter_paces_by_the_shared_budget_only_in_a_cluster(
    tmp_path: Path, fake_llm: FakeOpenAI, library: str
) -> None:
    """The runtime's door hands the budget out with ``cluster.enabled`` (the adapter wires it into
    the driver and its chat queues); alone it is ``None`` and the adapter is as it always was."""
    alone = compose(make_settings(tmp_path / "alone", fake_llm.base_url, telegram={"library": library}))
    async with pg_database() as url:
        clustered = compose(
            make_settings(
                tmp_path / "cluster",
                fake_llm.base_url,
                telegram={"library": library},
                storage={"url": url},
                cluster={"enabled": True},
            )
        )
        try:
            assert alone.runtime.send_budget is None
            assert alone.driver.api.queues.shared is ALONE
            budget = clustered.runtime.send_budget
            shared = clustered.driver.api.queues.shared
            assert isinstance(budget, SendBudget) and isinstance(shared, SharedBudget)
            assert shared.budget is budget
            assert shared.limits == TelegramLimits.of(clustered.settings.telegram.messages_per_second)
        finally:
            await clustered.stop()
            await alone.stop()
