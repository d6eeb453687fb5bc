"""The adapter's dispatch: the order groups run in, and a gate that fails closed."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pytest

from agentgram.bot.telegram.core.incoming import Chat, Message, Update, User
from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.router import (
    GATE,
    Dispatcher,
    HandlerContext,
    OnMessage,
    OnUpdate,
    Router,
    StopUpdate,
    join,
)

if TYPE_CHECKING:
    from agentgram.bot.telegram.core.context import BotContext

NO_API = cast("BotApi", object())  # dispatch passes it on and never calls it
NO_SHARED = cast("BotContext", object())


def update() -> Update:
    message = Message(7, Chat(1), NO_API, from_user=User(1), text="hi")
    return Update(update_id=1, api=NO_API, message=message)


def dispatcher(gate: OnUpdate, ran: list[str]) -> Dispatcher:
    async def feature(update: Update, context: HandlerContext) -> None:
        ran.append("feature")

    async def second(update: Update, context: HandlerContext) -> None:
        ran.append("second feature")

    features = Router("features", (OnMessage(lambda m: True, feature), OnMessage(lambda m: True, second)))
    return Dispatcher.of(join(Router("gate", (gate,), group=GATE), features))


async def test_the_gate_runs_first_then_only_the_first_feature_that_matches() -> None:
    ran: list[str] = []

    async def gate(update: Update, context: HandlerContext) -> None:
        ran.append("gate")

    await dispatcher(OnUpdate(gate), ran).process(update(), NO_SHARED)
    assert ran == ["gate", "feature"]


@pytest.mark.parametrize("error", [StopUpdate(), RuntimeError("the access list would not load")])
async def test_a_gate_that_stops_or_raises_lets_no_feature_handler_run(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed: python-telegram-bot went on to group 0 after a gate's exception."""
    ran: list[str] = []

    async def gate(update: Update, context: HandlerContext) -> None:
        ran.append("gate")
        raise error

    await dispatcher(OnUpdate(gate), ran).process(update(), NO_SHARED)
    assert ran == ["gate"]
    failed = [r for r in caplog.records if r.getMessage() == "handler failed on update 1"]
    assert len(failed) == (0 if isinstance(error, StopUpdate) else 1)
