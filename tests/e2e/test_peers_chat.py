"""Sessions that talk to each other (issue 29), as the Telegram chat shows them: a helper session
the chat's agent spawned shows only its final answers under its name (never its tool lines or
streamed text), its approval prompts say which session asks, a reply to its answer is mail to it,
``/stop all`` stops it with the chat's own turn, and ``/sessions`` lists it with Open / Stop /
Close buttons. Both drivers run these (the suite's driver parameter)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentgram.bot.telegram.views.spawned_view import sender_of
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, fakes, running_bot
from tests.fakes.openai_server import Error, Hang, Text
from tests.fakes.telegram_server import SentMessage
from tests.peers_rig import LLM, call, helper_agent

NAMED = "🤖 researcher (session 2)"
"""How the helper's messages start (its name is the spawn's ``name``; the chat's session is 1)."""


SPAWN = call("spawn_session", agent="helper", task="find the answer", name="researcher")


def _helper_requests(rig: Rig) -> list[dict[str, Any]]:
    return [r for r in rig.llm.requests if r["model"] == "helper-model"]


def _chat_requests(rig: Rig) -> list[dict[str, Any]]:
    return [r for r in rig.llm.requests if r["model"] != "helper-model"]


def _said(rig: Rig, needle: str) -> list[SentMessage]:
    return [m for m in rig.chat() if needle in m.visible_text]


def _ever_shown(rig: Rig) -> list[str]:
    """Every text the bot's messages showed, their earlier edits too."""
    return [text for m in rig.chat() for text in (*m.edits, m.text) if text]


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


async def _helper_status(rig: Rig) -> str:
    (helper,) = await rig.bot.runtime.sessions.spawned_under(1)
    assert helper.id == 2
    return str(helper.status)


async def _helper_answered(rig: Rig, text: str) -> SentMessage:
    await rig.wait_text(f"{NAMED}: {text}", timeout=10)
    await rig.wait_turns(2, timeout=10)  # the chat's turn and the helper's
    return _said(rig, f"{NAMED}: {text}")[0]


async def test_a_helpers_answer_arrives_once_under_its_name_and_its_tools_stay_out_of_the_chat(
    tmp_path: Path,
) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        # the chat's turn keeps its status line open while the helper works with its own tools
        rig.llm.script(SPAWN, Text("I asked a helper to look into it.", chunk_size=3, delay=0.1))
        rig.llm.on_model("helper-model", call("list_sessions"), Text("Found: **42**."))
        rig.say("find the answer with a helper")
        answer = await _helper_answered(rig, "Found: 42.")
        await rig.wait_text("I asked a helper to look into it.")

        assert len(_said(rig, "Found: 42")) == 1, "the helper's answer is one message, sent once"
        assert answer.visible_text == f"{NAMED}: Found: 42."
        assert "<b>researcher</b>" in (answer.text or "") and "<b>42</b>" in (answer.text or "")
        assert not answer.edits, "the helper's answer is sent whole, never streamed"
        assert not rig.drafted("Found"), "no draft streams the helper's text"
        status = _said(rig, "spawn_session")
        assert len(status) == 1, "the chat's own tool call has its status line"
        assert not any("list_sessions" in text for text in _ever_shown(rig)), (
            "the helper's tool calls show nowhere in the chat: not in the chat's status line"
        )
        spawned = await rig.bot.runtime.sessions.spawned(2, ALLOWED_USER)
        assert spawned is not None and spawned.name == "researcher"


async def test_a_reply_to_the_helpers_answer_is_mail_to_the_helper(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model("helper-model", Text("Found: 42."), Text("43 works too."))
        rig.say("find the answer with a helper")
        answer = await _helper_answered(rig, "Found: 42.")
        chat_calls = len(_chat_requests(rig))

        rig.say("and what about 43?", reply_to_message_id=answer.message_id)
        await rig.wait_text(f"{NAMED}: 43 works too.", timeout=10)
        asked = _helper_requests(rig)[-1]
        said = [str(m["content"]) for m in asked["messages"] if m["role"] == "user"]
        assert any("and what about 43?" in text for text in said), said
        assert len(_chat_requests(rig)) == chat_calls, "the chat's own session never read the reply"


async def test_stop_all_stops_a_hanging_helper_and_the_chats_own_turn(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Hang(first_text="Still thinking", seconds=30))
        rig.llm.on_model("helper-model", Hang(first_text="Digging", seconds=30))
        rig.say("find the answer with a helper")
        await rig.llm.wait_for_requests(3, timeout=10)  # spawn, the chat's hang, the helper's hang

        rig.say("/stop all")
        await rig.llm.wait_stream_closed(timeout=5, count=2)
        await rig.wait_text("⏹ Stopped 1 session started from this one.")
        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns(2)

        async def idle() -> bool:
            return await _helper_status(rig) == "idle"

        await _eventually(idle, "the helper works no more")
        assert not rig.drafted("Digging") and not _said(rig, "Digging"), "a helper never streams"
        assert _said(rig, "⏹ Stopped.")[0].visible_text == "⏹ Stopped.", (
            "the chat's own stop, as /stop says it"
        )


async def test_stop_without_all_leaves_the_helper_working(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Hang(first_text="Still thinking", seconds=30))
        rig.llm.on_model("helper-model", Hang(first_text="Digging", seconds=30))
        rig.say("find the answer with a helper")
        await rig.llm.wait_for_requests(3, timeout=10)

        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        await rig.llm.wait_stream_closed(timeout=5)
        assert await _helper_status(rig) == "running"
        assert not _said(rig, "session started from this one")


async def test_sessions_lists_the_helper_with_buttons_and_close_ends_it(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model("helper-model", Text("Found: 42."))
        rig.say("find the answer with a helper")
        answer = await _helper_answered(rig, "Found: 42.")

        rig.say("/sessions")
        await rig.wait_text("Sessions started from this one")
        card = await rig.wait_text(f"{NAMED}: idle")
        assert [label for row in card.buttons for label, _ in row] == ["📖 Open", "⏹ Stop", "✖️ Close"]

        rig.tg.press_button(ALLOWED_USER, card.message_id, card.button_data("Open"))
        await rig.tg.wait_for(lambda: len(_said(rig, f"{NAMED}: Found: 42.")) == 2)
        again = _said(rig, f"{NAMED}: Found: 42.")[-1]

        async def remembered() -> bool:
            return await sender_of(rig.bot.runtime.values, ALLOWED_USER, again.message_id) == 2

        await _eventually(remembered, "the reopened answer is remembered as the helper's")

        rig.tg.press_button(ALLOWED_USER, card.message_id, card.button_data("Close"))
        await rig.tg.wait_for(
            lambda: "finished" in rig.tg.message(ALLOWED_USER, card.message_id).visible_text
        )
        closed = rig.tg.message(ALLOWED_USER, card.message_id)
        assert [label for row in closed.buttons for label, _ in row] == ["📖 Open"]
        assert any(a.text == "Session 2 closed." for a in rig.tg.callback_answers)
        spawned = await rig.bot.runtime.sessions.spawned(2, ALLOWED_USER)
        assert spawned is not None and spawned.finished

        helper_calls = len(_helper_requests(rig))
        for replied in (answer, again):  # the answer reopened by 📖 is the helper's as well
            rig.say("one more thing", reply_to_message_id=replied.message_id)
        await rig.tg.wait_for(lambda: len(_said(rig, "Session 2 has finished")) == 2)
        assert len(_helper_requests(rig)) == helper_calls, "a closed session reads no more mail"


async def test_a_helpers_approval_prompt_names_it_and_approve_runs_the_command(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model(
            "helper-model",
            call("execute_cmd", command="echo from-the-helper"),
            Text("Ran it."),
        )
        rig.say("find the answer with a helper")
        prompt = await rig.wait_text("Approval needed", timeout=10)
        assert prompt.visible_text.startswith(f"{NAMED} asks:\n"), prompt.visible_text

        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"))
        await rig.wait_text(f"{NAMED}: Ran it.", timeout=10)
        results = [m["content"] for m in _helper_requests(rig)[-1]["messages"] if m["role"] == "tool"]
        assert any("from-the-helper" in str(result) for result in results), results
        decided = rig.tg.message(ALLOWED_USER, prompt.message_id)
        assert decided.visible_text.startswith(f"{NAMED} asks:"), "the decided prompt still names who asked"
        assert not decided.buttons


async def test_a_helpers_question_names_it_and_a_reply_to_it_is_its_answer(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("Asked."))
        rig.llm.on_model(
            "helper-model",
            call("ask_user_clarification", question="Which database?", options=["prod", "staging"]),
            Text("Using the replica."),
        )
        rig.say("find the answer with a helper")
        question = await rig.wait_text("Which database?", timeout=10)
        assert question.visible_text.startswith(f"{NAMED} asks:\n"), question.visible_text

        async def pending() -> bool:
            return rig.bot.runtime.parts.questions.pending_in(2) is not None

        async def remembered() -> bool:
            return await sender_of(rig.bot.runtime.values, ALLOWED_USER, question.message_id) == 2

        await _eventually(pending, "the helper waits on its question")
        await _eventually(remembered, "the question is remembered as the helper's")
        chat_calls = len(_chat_requests(rig))
        rig.say("the read replica", reply_to_message_id=question.message_id)
        await rig.wait_text(f"{NAMED}: Using the replica.", timeout=10)
        results = [m["content"] for m in _helper_requests(rig)[-1]["messages"] if m["role"] == "tool"]
        assert results[-1] == "the read replica"
        shown = rig.tg.message(ALLOWED_USER, question.message_id)
        assert shown.visible_text.startswith(f"{NAMED} asks:") and shown.visible_text.endswith(
            "✅ the read replica"
        )
        assert len(_chat_requests(rig)) == chat_calls, "the chat's own session never read the answer"


async def test_a_helpers_answer_the_chat_never_showed_is_sent_after_a_restart(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with fakes() as chat:
        tg, _ = chat
        refused = "Bad Request: chat not found"
        tg.fail_next(
            "sendMessage", status=400, description=refused, when=lambda p: "42" in str(p.get("text"))
        )
        async with running_bot(tmp_path, llm=LLM, on=chat) as rig:
            rig.llm.script(SPAWN, Text("Asked."))
            rig.llm.on_model("helper-model", Text("Found: 42."))
            rig.say("find the answer with a helper")
            await rig.wait_turns(2, timeout=10)
            assert not _said(rig, "Found: 42."), "Telegram refused it: not shown, not reported shown"
        async with running_bot(tmp_path, llm=LLM, on=chat) as rig:
            await rig.wait_text(f"{NAMED}: Found: 42.", timeout=10)
            await rig.bot.delivery.idle()
            assert len(_said(rig, "Found: 42.")) == 1


async def test_a_helper_whose_turn_fails_says_so_under_its_name(tmp_path: Path) -> None:
    helper_agent(tmp_path)
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.script(SPAWN, Text("I asked a helper."))
        rig.llm.on_model("helper-model", Error(400, "the request was refused"))
        rig.say("find the answer with a helper")
        failed = await rig.wait_text(NAMED, timeout=10)
        await rig.wait_turns(2, timeout=10)
        assert failed.visible_text.startswith(f"{NAMED}: ⚠️"), failed.visible_text
        assert "the request was refused" not in failed.visible_text, (
            "a locale text, never the provider's words"
        )
        assert len(_said(rig, NAMED)) == 1
