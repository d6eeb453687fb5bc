"""Answers to an approval prompt that arrive at awkward moments, end to end.

A tap whose callback answer Telegram fails; a reply to the prompt before the
bot even knows the prompt's message id; a plain message while the turn waits
for the decision. Real python-telegram-bot and openai SDK between the fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import (
    PROMPT,
    lines,
    prompts,
    shell,
    tap,
    tool_results,
    user_texts,
    wait_decided,
    wait_prompt,
)
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import SentMessage

WAITING_NOTE = "my next step waits for your decision on execute_cmd"


def answer_calls(rig: Rig) -> int:
    return len(rig.tg.calls("answerCallbackQuery"))


async def approve_despite(rig: Rig, **failure: Any) -> SentMessage:
    """Script a command, fail the tap's callback answer as ``failure`` says, tap Approve;
    returns the prompt once the turn has finished."""
    rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
    rig.say("run it")
    prompt = await wait_prompt(rig)
    rig.tg.fail_next("answerCallbackQuery", **failure)
    tap(rig, prompt, "✅ Approve")
    await rig.wait_turns()
    return prompt


# --- the callback answer fails: the decision stands ---------------------------------------------


async def test_a_failed_callback_answer_is_retried_and_the_decision_applied(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        prompt = await approve_despite(rig, status=502)
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert tool_results(rig.llm.requests[1]) == ["(no output)\nexit code: 0"]
        await wait_decided(rig, prompt, "✅ Approved")
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 1)
        assert rig.tg.callback_answers[0].text == "✅ Approved"
        assert answer_calls(rig) == 2 and rig.tg.unanswered_callbacks() == []


async def test_a_callback_answer_failing_twice_still_applies_the_decision(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        prompt = await approve_despite(rig, status=502, times=2)
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        await wait_decided(rig, prompt, "✅ Approved")
        await rig.tg.wait_for(lambda: answer_calls(rig) == 2)
        assert rig.tg.callback_answers == [] and len(rig.tg.unanswered_callbacks()) == 1
        rig.llm.script(Text("Still here."))  # the update loop goes on
        rig.say("hello?")
        await rig.wait_text("Still here.")


async def test_a_short_429_on_the_callback_answer_is_waited_out(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        await approve_despite(rig, status=429, retry_after=1)
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 1, timeout=3.0)
        assert answer_calls(rig) == 2


async def test_a_long_429_on_the_callback_answer_is_not_waited_for(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        started = asyncio.get_running_loop().time()
        await approve_despite(rig, status=429, retry_after=30)
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert asyncio.get_running_loop().time() - started < 10
        assert answer_calls(rig) == 1 and rig.tg.callback_answers == []


# --- a reply to the prompt, recognised from the prompt itself -----------------------------------


@asynccontextmanager
async def prompt_send_held(rig: Rig) -> AsyncIterator[Callable[[], Awaitable[SentMessage]]]:
    """Telegram stores the approval prompt at once but its answer to sendMessage is held until
    the block ends: the user sees (and can reply to) a prompt whose message id the bot does not
    know yet. Yields a function that waits until the prompt is in the chat."""
    tg = rig.tg
    shown, release = asyncio.Event(), asyncio.Event()
    send = tg._methods["sendmessage"]

    async def held(params: dict[str, Any]) -> Any:
        result = await send(params)
        if PROMPT in result.get("text", "") and not shown.is_set():
            shown.set()
            tg._changed()  # the chat shows the prompt now; its answer to the bot waits
            await release.wait()
        return result

    async def prompt_shown() -> SentMessage:
        await asyncio.wait_for(shown.wait(), 5.0)
        return prompts(rig)[0]

    tg._methods["sendmessage"] = held
    try:
        yield prompt_shown
    finally:
        release.set()
        tg._methods["sendmessage"] = send


async def test_a_reply_before_the_prompts_send_returned_rejects_with_the_reason(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("psql prod -c 'select 1'"), Text("Switching to staging."))
        async with prompt_send_held(rig) as prompt_shown:
            rig.say("check the db")
            prompt = await prompt_shown()
            rig.say("no — use the staging DB", reply_to_message_id=prompt.message_id)
            await rig._recorder.wait_kind("approval_resolved")  # type: ignore[attr-defined]
            assert (
                await rig.bot.runtime.parts.approval_manager.by_message(ALLOWED_USER, prompt.message_id)
                is None
            )
        await rig.wait_turns()
        await wait_decided(rig, prompt, "❌ Rejected: no — use the staging DB")
        assert tool_results(rig.llm.requests[1]) == [
            "User rejected this tool call. Reason: no — use the staging DB"
        ]
        assert all("staging" not in text for text in user_texts(rig.llm.requests[1]))
        assert not any("Noted" in text for text in rig.texts())
        assert rig.llm.calls == 2


async def test_a_reply_to_a_decided_prompt_is_told_it_is_stale(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        decided = await wait_decided(rig, prompt, "✅ Approved")
        assert decided.buttons == []  # the reply finds the request by the stored message id
        rig.say("no, wait", reply_to_message_id=prompt.message_id)
        stale = await rig.wait_text("This request is no longer pending.")
        assert stale.reply_to_message_id is not None
        await rig.bot.delivery.idle()
        assert rig.llm.calls == 2 and not any("Noted" in text for text in rig.texts())


# --- a plain message while the prompt waits ------------------------------------------------------


async def test_a_message_while_a_prompt_waits_points_at_the_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done, and noted."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        rig.say("also tell me the date")
        note = await rig.wait_text(WAITING_NOTE)
        assert "Tap a button on the approval request, or reply to it" in note.visible_text
        assert note.reply_to_message_id == prompt.message_id
        assert [r for r in rig.tg.reactions.values() if {"type": "emoji", "emoji": "👀"} in r]
        assert not any("I'll read this at my next step" in text for text in rig.texts())
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert user_texts(rig.llm.requests[1])[-1] == "also tell me the date"  # kept as mail


async def test_the_waiting_note_speaks_the_users_language(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("ls"), Text("Готово."))
        rig.say("покажи файлы", language_code="ru")
        prompt = await wait_prompt(rig, prompt_text="Нужно ваше подтверждение")
        rig.say("и ещё дату", language_code="ru")
        note = await rig.wait_text("следующий шаг ждёт вашего решения по execute_cmd")
        assert note.reply_to_message_id == prompt.message_id
        tap(rig, prompt, "❌ Отклонить")
        await rig.wait_turns()


async def test_a_message_before_the_prompt_is_known_names_the_waiting_tool(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        async with prompt_send_held(rig) as prompt_shown:
            rig.say("run it")
            prompt = await prompt_shown()
            rig.say("and hurry")
            queues = rig.bot.driver.api.queues  # type: ignore[attr-defined]
            # read while the prompt is unknown: its note waits behind the prompt's send
            await rig.tg.wait_for(lambda: queues.waiting(ALLOWED_USER) >= 2)
        # the note waits its turn in the chat's one queue behind the prompt's send (issue 24)
        note = await rig.wait_text(WAITING_NOTE)
        assert note.reply_to_message_id not in (None, prompt.message_id)  # the user's message
        await wait_prompt(rig)
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert user_texts(rig.llm.requests[1])[-1] == "and hurry"
