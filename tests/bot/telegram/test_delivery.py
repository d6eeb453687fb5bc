"""Telegram ``Delivery`` on its own: runtime events in, what the chat sees out.

Each driver's real client (``telegram.library``: python-telegram-bot, aiogram)
talks to the fake Bot API server; a real ``Runtime`` on a tmp SQLite gives
delivery the records, outbox and approvals it reads and writes. Events are fed
to delivery directly, as the event bus would: no LLM call, no turn loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from agentgram.bot.telegram.drivers import make_driver
from agentgram.bot.telegram.views import delivery as delivery_module
from agentgram.bot.telegram.views.delivery import Delivery
from agentgram.bot.telegram.views.stream import FIRST_DRAFT_WAIT, ROUND_END_WAIT
from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.events import (
    Address,
    ApprovalDetails,
    ApprovalRequested,
    ApprovalResolved,
    DurableOutput,
    ModelText,
    Notice,
    OutcomeKind,
    Report,
    RoundEnded,
    RuntimeEvent,
    StreamEnded,
    TextDelta,
    TicResult,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.models import ApprovalStatus, Turn, utcnow
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_html import visible_length
from tests.fakes.telegram_server import FakeTelegram, SentMessage

CHAT = ALLOWED_USER
TURN = 1


@dataclass
class Rig:
    tg: FakeTelegram
    runtime: Runtime
    delivery: Delivery
    to: Address

    def chat(self) -> list[SentMessage]:
        return self.tg.messages(CHAT)

    def feed(self, *events: RuntimeEvent) -> None:
        for event in events:
            self.delivery(event)  # as the event bus calls it

    async def delivered(self) -> None:
        await self.delivery.idle()


@pytest.fixture
async def rig(tmp_path: Path, fake_llm: FakeOpenAI, telegram_library: str) -> AsyncIterator[Rig]:
    async with FakeTelegram() as tg:
        tg.add_chat(CHAT)
        settings = make_settings(tmp_path, fake_llm.base_url, tg.root, telegram={"library": telegram_library})
        api = make_driver(settings.telegram).api
        runtime = Runtime(settings, format_rules="")
        delivery = Delivery(api, runtime, Translator(), edit_interval=0.05)
        runtime.subscribe(delivery)  # as the adapter is wired (bot.telegram.app.compose)
        runtime.on_close(delivery.close)
        try:
            await api.get_me()
            async with runtime:
                session, _ = await runtime.parts.session_store.find_or_open(CHAT, user_id=CHAT, language="en")
                assert session.id is not None
                to = Address(session_id=session.id, source=session.source, chat_id=CHAT, language="en")
                yield Rig(tg, runtime, delivery, to)
        finally:
            await api.close()


async def test_streamed_text_is_one_message_then_edits(rig: Rig) -> None:
    rig.feed(TurnStarted(to=rig.to, turn_id=TURN), TextDelta(to=rig.to, turn_id=TURN, text="Hello"))
    await rig.tg.wait_for(lambda: len(rig.chat()) == 1)
    rig.feed(
        TextDelta(to=rig.to, turn_id=TURN, text=", world"),
        RoundEnded(to=rig.to, turn_id=TURN, text="Hello, world", has_tool_calls=False),
        TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL),
    )
    await rig.delivered()
    [message] = rig.chat()
    assert message.visible_text == "Hello, world"
    assert message.edits == ["Hello"]  # sent once, then edited in place


async def test_a_private_chat_streams_a_draft_at_once_and_sends_the_text_once(rig: Rig) -> None:
    drafting = Delivery(rig.delivery.bot, rig.runtime, Translator(), edit_interval=0.05, drafts=True)
    try:
        drafting(TurnStarted(to=rig.to, turn_id=TURN))
        drafting(TextDelta(to=rig.to, turn_id=TURN, text="Hello"))
        await rig.tg.wait_for(lambda: rig.tg.draft_texts(CHAT) == ["Hello"])
        assert rig.chat() == [], "a draft posts no message"
        drafting(TextDelta(to=rig.to, turn_id=TURN, text=", world"))
        drafting(RoundEnded(to=rig.to, turn_id=TURN, text="Hello, world", has_tool_calls=False))
        drafting(TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL))
        await drafting.idle()
    finally:
        await drafting.close()
    [message] = rig.chat()
    assert message.visible_text == "Hello, world" and message.edits == []


async def test_no_draft_when_the_rounds_whole_text_is_already_queued(rig: Rig) -> None:
    """A fast model's answer (deltas and the round's end queued together) goes out as its one
    message: a draft of it would be a request for nothing (issue 31, CPU per turn)."""
    drafting = Delivery(rig.delivery.bot, rig.runtime, Translator(), edit_interval=0.05, drafts=True)
    try:
        drafting(TurnStarted(to=rig.to, turn_id=TURN))
        drafting(TextDelta(to=rig.to, turn_id=TURN, text="Hello"))
        drafting(TextDelta(to=rig.to, turn_id=TURN, text=", world"))
        drafting(RoundEnded(to=rig.to, turn_id=TURN, text="Hello, world", has_tool_calls=False))
        drafting(TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL))
        await drafting.idle()
    finally:
        await drafting.close()
    assert rig.tg.draft_texts(CHAT) == []
    [message] = rig.chat()
    assert message.visible_text == "Hello, world" and message.edits == []


async def test_no_draft_when_the_round_ends_within_the_first_drafts_wait(rig: Rig) -> None:
    """A reply complete within :data:`FIRST_DRAFT_WAIT` of its first text (its end not yet queued
    when that text came) is one message and no draft."""
    drafting = Delivery(rig.delivery.bot, rig.runtime, Translator(), edit_interval=0.05, drafts=True)
    try:
        drafting(TurnStarted(to=rig.to, turn_id=TURN))
        drafting(TextDelta(to=rig.to, turn_id=TURN, text="Hi"))
        await asyncio.sleep(FIRST_DRAFT_WAIT / 3)
        drafting(RoundEnded(to=rig.to, turn_id=TURN, text="Hi there", has_tool_calls=False))
        drafting(TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL))
        await drafting.idle()
        await asyncio.sleep(FIRST_DRAFT_WAIT * 2)
    finally:
        await drafting.close()
    assert rig.tg.draft_texts(CHAT) == []
    [message] = rig.chat()
    assert message.visible_text == "Hi there" and message.edits == []


async def test_a_complete_round_being_stored_shows_no_draft(rig: Rig) -> None:
    """The model's stream ended with no tool call (:class:`StreamEnded`): however long the round's
    store then takes (here ten first-draft waits, a busy database), its text shows once, as the
    message its end sends, with no draft before it; a stream that goes on drafts as usual."""
    drafting = Delivery(rig.delivery.bot, rig.runtime, Translator(), edit_interval=0.05, drafts=True)
    try:
        drafting(TurnStarted(to=rig.to, turn_id=TURN))
        drafting(TextDelta(to=rig.to, turn_id=TURN, text="Hi"))
        drafting(StreamEnded(to=rig.to, turn_id=TURN, has_tool_calls=False))
        await asyncio.sleep(FIRST_DRAFT_WAIT * 10)
        assert rig.tg.draft_texts(CHAT) == []
        drafting(RoundEnded(to=rig.to, turn_id=TURN, text="Hi there", has_tool_calls=False))
        drafting(TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL))
        await drafting.idle()
        assert rig.tg.draft_texts(CHAT) == []
        [message] = rig.chat()
        assert message.visible_text == "Hi there" and message.edits == []

        drafting(TurnStarted(to=rig.to, turn_id=TURN + 1))
        drafting(TextDelta(to=rig.to, turn_id=TURN + 1, text="Still writing"))
        drafting(StreamEnded(to=rig.to, turn_id=TURN + 1, has_tool_calls=True))  # a call follows
        await asyncio.sleep(FIRST_DRAFT_WAIT * 10)
        assert ROUND_END_WAIT > FIRST_DRAFT_WAIT * 10
        assert rig.tg.draft_texts(CHAT) == ["Still writing"]
    finally:
        await drafting.close()


async def test_a_final_answer_over_4096_is_split(rig: Rig) -> None:
    words = " ".join(f"word{i}" for i in range(1500))  # ~12 000 characters
    rig.feed(
        TurnStarted(to=rig.to, turn_id=TURN),
        RoundEnded(to=rig.to, turn_id=TURN, text=words, has_tool_calls=False),
        TurnFinished(to=rig.to, turn_id=TURN, outcome=OutcomeKind.FINAL),
    )
    await rig.delivered()
    parts = rig.chat()
    assert len(parts) >= 3
    assert all(visible_length(m.text or "") <= 4096 for m in parts)
    assert " ".join(m.visible_text.strip() for m in parts).split() == words.split()


async def _unshown(runtime: Runtime) -> list[object]:
    return list(await runtime.parts.outbox.unshown(since=utcnow() - timedelta(hours=1)))


async def _recorded(runtime: Runtime, event: DurableOutput) -> DurableOutput:
    """Recorded as ``Runtime.publish`` does before it emits: until shown, a restart sends it."""
    recorded = await runtime.parts.outbox.record(event)
    assert recorded.outbox_id is not None and len(await _unshown(runtime)) == 1
    return recorded


async def test_a_notice_is_sent_and_reported_shown(rig: Rig) -> None:
    notice = Notice(to=rig.to, key="approval-not-shown", params={"tool": "<x>"})
    rig.feed(await _recorded(rig.runtime, notice))
    await rig.delivered()
    assert [m.visible_text.count("<x>") for m in rig.chat()] == [1]  # the parameter escaped, shown as is
    assert await _unshown(rig.runtime) == []  # output_shown: a restart does not send it again


async def test_a_report_is_sent_and_reported_shown(rig: Rig) -> None:
    report = Report(to=rig.to, content=TicResult(body=ModelText(text="All **quiet**.")))
    rig.feed(await _recorded(rig.runtime, report))
    await rig.delivered()
    [message] = rig.chat()
    assert "All quiet." in message.visible_text and "<b>quiet</b>" in (message.text or "")
    assert await _unshown(rig.runtime) == []


async def _request(runtime: Runtime, session_id: int) -> tuple[str, int]:
    """A pending approval request for a stored tool call, as the turn's gate opens one."""
    async with runtime.parts.db.write() as tx:
        turn = Turn(session_id=session_id)
        tx.add(turn)
        await tx.flush()
        turn_id = turn.id or 0
    call = ToolCallRequest(id="c1", name="execute_cmd", arguments='{"command": "ls"}')
    entry = await runtime.parts.history.record_round(
        session_id=session_id, turn_id=turn_id, result=LLMRound(tool_calls=[call])
    )
    call_id = entry.calls[0].id or 0
    request, _ = await runtime.parts.approval_manager.request_for_call(session_id, call_id, CHAT)
    return request.id, call_id


def _asked(rig: Rig, request_id: str, call_id: int) -> ApprovalRequested:
    details = ApprovalDetails(tool_name="execute_cmd", arguments={"command": "ls"}, command="ls")
    return ApprovalRequested(to=rig.to, request_id=request_id, tool_call_id=call_id, details=details)


async def test_an_approval_prompt_that_cannot_be_sent_expires_its_request(rig: Rig) -> None:
    request_id, call_id = await _request(rig.runtime, rig.to.session_id)
    rig.tg.fail_next("sendMessage", status=400, description="Bad Request: chat is gone for a moment")
    rig.feed(_asked(rig, request_id, call_id))
    await rig.delivered()
    request = await rig.runtime.parts.approval_manager.get(request_id)
    assert request is not None and request.status == ApprovalStatus.EXPIRED
    [told] = rig.chat()  # not the prompt: the chat is told it could not be shown
    assert "execute_cmd" in told.visible_text and not told.buttons


async def test_no_typing_while_the_turn_waits_for_a_decision(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_module, "TYPING_AFTER", 0.0)
    monkeypatch.setattr(delivery_module, "TYPING_EVERY", 0.02)
    request_id, call_id = await _request(rig.runtime, rig.to.session_id)
    rig.feed(TurnStarted(to=rig.to, turn_id=TURN))
    await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) >= 1)
    rig.feed(_asked(rig, request_id, call_id))
    await rig.tg.wait_for(lambda: any(m.buttons for m in rig.chat()))
    await rig.delivered()
    typed = len(rig.tg.chat_actions)
    await asyncio.sleep(0.2)  # ten typing periods: none may be sent while the prompt waits
    assert len(rig.tg.chat_actions) == typed
    rig.feed(
        ApprovalResolved(
            to=rig.to, request_id=request_id, status=ApprovalStatus.APPROVED, reason=None, message_id=None
        )
    )
    await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) > typed)  # the turn goes on: typing again


async def test_no_typing_while_the_rounds_text_arrives_and_typing_again_for_its_tools(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing says nothing a draft or message growing with the text does not (issue 31: it would
    cost a Bot API request a turn when every turn waits past ``TYPING_AFTER`` in a busy bot)."""
    monkeypatch.setattr(delivery_module, "TYPING_AFTER", 0.0)
    monkeypatch.setattr(delivery_module, "TYPING_EVERY", 0.02)
    rig.feed(TurnStarted(to=rig.to, turn_id=TURN))
    await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) >= 1)  # working, nothing said yet
    rig.feed(TextDelta(to=rig.to, turn_id=TURN, text="Let me look"))
    await rig.tg.wait_for(lambda: rig.chat() != [])  # the text shows (after the first edit's delay)
    typed = len(rig.tg.chat_actions)
    await asyncio.sleep(0.2)  # ten typing periods while the text shows
    assert len(rig.tg.chat_actions) == typed
    rig.feed(RoundEnded(to=rig.to, turn_id=TURN, text="Let me look", has_tool_calls=True))
    await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) > typed)  # its tools run: typing again
