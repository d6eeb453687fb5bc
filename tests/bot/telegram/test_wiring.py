"""How the adapter is put together: routers joined in one place, nothing registered on import,
one composition function, and every task with an owner that ends it."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from agentgram.bot.telegram import handlers
from agentgram.bot.telegram.app import compose
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction
from agentgram.bot.telegram.core.router import FEATURES, GATE, OnButton, OnMessage, OnUpdate, Router, join
from agentgram.bot.telegram.handlers import access, approvals, commands, schedule
from agentgram.runtime.infra.tasks import TaskSet
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI

HANDLER_FILES = sorted(Path(handlers.__file__).parent.glob("*.py"))


async def _nothing(update: object, ctx: object, button: Button) -> None:
    raise AssertionError("never routed")


# --- routers ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", HANDLER_FILES, ids=lambda p: p.name)
def test_importing_a_handler_file_registers_nothing(path: Path) -> None:
    """Its top level only defines: no call made for its effect, and no registry to fill."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    effects = [node.lineno for node in tree.body if isinstance(node, ast.Expr | ast.For | ast.With)]
    effects = [n for n in effects if not _is_docstring(tree, n)]
    assert effects == [], f"{path.name} does something at import, line(s) {effects}"
    assert "BUTTON_HANDLERS" not in path.read_text(encoding="utf-8")


def _is_docstring(tree: ast.Module, lineno: int) -> bool:
    for node in tree.body:
        if node.lineno == lineno and isinstance(node, ast.Expr):
            return isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    return False


def test_joining_is_what_fills_the_button_table() -> None:
    assert join().buttons == {}
    assert dict(join(schedule.router).buttons) == dict(schedule.router.buttons)


def test_every_button_action_has_exactly_one_handler_once_joined() -> None:
    joined = handlers.join()
    assert set(joined.buttons) == set(ButtonAction)
    claims = [action for router in joined.routers for action in router.buttons]
    assert sorted(claims) == sorted(ButtonAction)  # once each: no action claimed by two routers


def test_an_action_joined_twice_is_refused() -> None:
    intruder = Router("intruder", buttons={ButtonAction.APPROVE: _nothing})
    with pytest.raises(ValueError, match=r"registered twice: ap \(again by intruder\)"):
        join(access.router, approvals.router, intruder)
    with pytest.raises(ValueError, match="registered twice"):
        join(schedule.router, schedule.router)


def test_the_joined_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        handlers.join().buttons[ButtonAction.APPROVE] = _nothing  # type: ignore[index]


def test_the_gate_comes_first_and_the_fallback_last() -> None:
    joined = handlers.join()
    assert joined.routers[0] is access.router and access.router.group == GATE < FEATURES
    assert joined.routers[-1] is commands.fallback


# --- composition ----------------------------------------------------------------------------


async def test_compose_wires_one_bot_and_a_second_gets_its_own(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    bots = [compose(make_settings(tmp_path / name, fake_llm.base_url)) for name in ("a", "b")]
    try:
        for bot in bots:
            assert [type(h) for h in bot.dispatcher.handlers(GATE)] == [OnUpdate]
            features = bot.dispatcher.handlers(FEATURES)
            assert sum(isinstance(h, OnButton) for h in features) == 1  # the one dispatch
            assert isinstance(features[-1], OnMessage)  # the unknown-command fallback
            assert features[-1] is commands.fallback.handlers[0]
            assert set(bot.routers.buttons) == set(ButtonAction)
            assert bot.delivery.close in bot.runtime.close_hooks  # closed by the runtime's one shutdown
        assert bots[0].routers.buttons is not bots[1].routers.buttons
    finally:
        for bot in bots:
            await bot.stop()


async def test_stopping_a_bot_that_never_started_closes_its_runtime_once(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    bot = compose(make_settings(tmp_path, fake_llm.base_url))
    await bot.stop()
    assert bot.runtime.closed
    await bot.stop()  # a second stop finds nothing left to do
    assert bot.runtime.closed


# --- tasks ------------------------------------------------------------------------------------


async def test_a_task_set_forgets_finished_tasks_and_ends_the_rest_on_close() -> None:
    tasks = TaskSet("test")
    done = tasks.spawn(asyncio.sleep(0), name="quick")
    forever = tasks.spawn(asyncio.Event().wait(), name="forever")
    await done
    await asyncio.sleep(0)  # the done callback runs
    assert len(tasks) == 1
    await tasks.close()
    assert forever.cancelled() and len(tasks) == 0
    with pytest.raises(RuntimeError, match="closed"):
        tasks.spawn(asyncio.sleep(0))
    await tasks.close()  # idempotent
