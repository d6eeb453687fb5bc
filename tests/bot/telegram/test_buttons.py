"""The one button dispatch: every action has exactly one owner, features stay apart, a
press nobody handles is answered politely instead of left spinning, and an answer that
fails is retried once when that can help and never raises."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest

from agentgram.bot.telegram import handlers as handlers_package
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext
from agentgram.bot.telegram.core.incoming import CallbackQuery, Update, User
from agentgram.bot.telegram.core.port import (
    BadRequest,
    BotApi,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from agentgram.bot.telegram.core.router import ButtonTable, HandlerContext, Router, join
from agentgram.bot.telegram.handlers import approvals, buttons, schedule
from agentgram.bot.telegram.handlers.buttons import answer, on_button
from agentgram.runtime.infra.i18n import Translator

HANDLERS_DIR = Path(handlers_package.__file__).parent
BUTTON_HANDLERS = handlers_package.join().buttons
"""The table every bot's dispatch reads: all handler files' routers, joined."""


@dataclass
class FakeAnswers:
    """Telegram's side of ``answerCallbackQuery``, the one Bot API call a press's answer makes:
    the answers given, after raising the queued failures one per attempt."""

    answers: list[str | None] = field(default_factory=list)
    failures: list[TelegramError] = field(default_factory=list)  # raised by the next answers
    attempts: int = 0

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        self.answers.append(text)


def press(data: str | None, *failures: TelegramError) -> tuple[Update, HandlerContext, FakeAnswers]:
    """An update carrying one callback query, and the context a handler gets with it."""
    telegram = FakeAnswers(failures=list(failures))
    api = cast(BotApi, telegram)  # only answer_callback_query is ever called
    user = User(1001, first_name="Ann", language_code="en")
    update = Update(1, api, callback_query=CallbackQuery("q1", user, api, data=data))
    ctx = BotContext(runtime=None, settings=None, translator=Translator(), delivery=None)  # type: ignore[arg-type]
    return update, HandlerContext(api, ctx), telegram


def test_every_button_action_has_a_handler() -> None:
    assert set(BUTTON_HANDLERS) == set(ButtonAction)


def test_each_feature_registers_its_own_buttons() -> None:
    assert BUTTON_HANDLERS[ButtonAction.APPROVE].__module__ == approvals.__name__
    assert BUTTON_HANDLERS[ButtonAction.CRON_RUN].__module__ == schedule.__name__


def test_an_action_registered_twice_is_refused_and_the_first_owner_kept() -> None:
    owner = BUTTON_HANDLERS[ButtonAction.CRON_RUN]

    async def intruder(update: Any, ctx: Any, button: Button) -> None:
        raise AssertionError("never routed")

    with pytest.raises(ValueError, match="registered twice: cr"):
        join(approvals.router, schedule.router, Router("intruder", buttons={ButtonAction.CRON_RUN: intruder}))
    assert BUTTON_HANDLERS[ButtonAction.CRON_RUN] is owner
    assert handlers_package.join().buttons[ButtonAction.CRON_RUN] is owner


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(("module", "other"), [("approvals", "schedule"), ("schedule", "approvals")])
def test_button_features_do_not_import_each_other(module: str, other: str) -> None:
    assert f"agentgram.bot.telegram.handlers.{other}" not in _imported_modules(HANDLERS_DIR / f"{module}.py")


@pytest.mark.parametrize("data", [None, "garbage", "ag1:zz:abc", encode(Button(ButtonAction.CRON_RUN, "7"))])
async def test_a_press_nobody_handles_is_answered_politely(data: str | None) -> None:
    table: ButtonTable = {a: h for a, h in BUTTON_HANDLERS.items() if a != ButtonAction.CRON_RUN}  # unowned
    update, context, query = press(data)
    await on_button(table, update, context)
    assert query.answers == ["This button no longer works."]


async def test_a_press_reaches_its_registered_handler() -> None:
    seen: list[Button] = []

    async def handler(update: Any, ctx: BotContext, button: Button) -> None:
        seen.append(button)

    table = {**BUTTON_HANDLERS, ButtonAction.CRON_RUN: handler}
    update, context, query = press(encode(Button(ButtonAction.CRON_RUN, "7")))
    await on_button(table, update, context)
    assert seen == [Button(ButtonAction.CRON_RUN, "7")] and query.answers == []


# --- answering: retried once when it can help, never raising -------------------------------------


@pytest.fixture
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buttons, "ANSWER_RETRY", replace(buttons.ANSWER_RETRY, first_delay=0.0))


@pytest.mark.parametrize(
    "failure",
    [NetworkError("Bad Gateway"), TimedOut("Timed out"), RetryAfter("Flood control exceeded", 0)],
    ids=["5xx", "timeout", "short-429"],
)
async def test_a_transient_answer_failure_is_retried_once(no_pause: None, failure: TelegramError) -> None:
    update, _, query = press("x", failure)
    await answer(update, "✅ Approved")
    assert query.attempts == 2 and query.answers == ["✅ Approved"]


@pytest.mark.parametrize(
    "failures",
    [
        [NetworkError("Bad Gateway"), NetworkError("Bad Gateway")],
        [RetryAfter("Flood control exceeded", 30)],  # longer than a toast is worth waiting for
        [BadRequest("Query is too old and response timeout expired or query id is invalid")],
        [Forbidden("Forbidden: bot was blocked by the user")],
    ],
    ids=["twice", "long-429", "expired", "forbidden"],
)
async def test_an_answer_that_cannot_be_given_is_given_up_without_raising(
    no_pause: None, failures: list[TelegramError]
) -> None:
    update, _, query = press("x", *failures)
    await answer(update, "✅ Approved")
    assert query.answers == [] and query.attempts == (2 if len(failures) == 2 else 1)


async def test_a_failing_answer_does_not_break_the_dispatch(no_pause: None) -> None:
    update, context, query = press("garbage", NetworkError("Bad Gateway"), NetworkError("Bad Gateway"))
    await on_button(BUTTON_HANDLERS, update, context)
    assert query.attempts == 2
