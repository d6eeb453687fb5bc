"""Streaming through drafts (``sendMessageDraft``), with the real python-telegram-bot against the
fake Bot API: the first words show while the model still writes, the answer is then one message,
and a chat or server without drafts streams by edits as before (:mod:`bot.telegram.drafts`)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.infra.events import (
    Address,
    OutcomeKind,
    RoundEnded,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls
from tests.fakes.telegram_server import RecordedRequest

CHAT = ALLOWED_USER
DRAFT_INTERVAL = 0.15


def draft_requests(rig: Rig, chat_id: int = CHAT) -> list[RecordedRequest]:
    return [r for r in rig.tg.calls("sendMessageDraft") if str(r.params.get("chat_id")) == str(chat_id)]


def sends_with(rig: Rig, needle: str) -> list[RecordedRequest]:
    return [r for r in rig.tg.calls("sendMessage") if needle in str(r.params.get("text"))]


def answered_at(rig: Rig, replies: list[Reply]) -> list[float]:
    """Serve ``replies`` in turn, noting when each was asked for: its first token follows at once."""
    asked: list[float] = []
    queue = iter(replies)

    def reply(body: dict[str, Any]) -> Reply:
        asked.append(time.time())
        return next(queue)

    rig.llm.handler = reply
    return asked


async def test_the_first_words_show_as_a_draft_while_the_model_still_writes(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={"stream_first_delay": 3.0}) as rig:
        asked = answered_at(rig, [Hang(first_text="Let me think", seconds=1.5)])
        rig.say("think")
        await rig.tg.wait_for(lambda: bool(rig.tg.drafts))
        first = rig.tg.drafts[0]
        assert first.visible_text == "Let me think"
        assert first.time - asked[0] < 1.0, "shown as the first token came, not after stream_first_delay"
        assert sends_with(rig, "Let me think") == [], "the model still writes: nothing is posted yet"
        await rig.wait_turns(timeout=15)
        [reply] = [m for m in rig.chat() if "Let me think" in m.visible_text]
        assert reply.visible_text == "Let me think" and reply.edits == []
        [sent] = sends_with(rig, "Let me think")
        assert all(d.time <= sent.time for d in rig.tg.drafts), "no draft after the answer"


async def test_a_streamed_answer_is_throttled_drafts_then_one_message_and_no_edits(tmp_path: Path) -> None:
    text = "Hello! " * 40
    async with running_bot(tmp_path, telegram={"draft_interval": DRAFT_INTERVAL}) as rig:
        rig.llm.script(Text(text, chunk_size=10, delay=0.04))  # ~1.1 s of streaming
        rig.say("hi")
        await rig.wait_turns(timeout=15)
        drafts = rig.tg.draft_texts(CHAT)
        assert len(drafts) >= 3, drafts
        assert all(text.startswith(d) for d in drafts), "each draft shows the text so far"
        assert drafts == sorted(drafts, key=len) and len(set(drafts)) == len(drafts)
        assert len({d.draft_id for d in rig.tg.drafts}) == 1, "one round, one draft, animated"
        gaps = [b.time - a.time for a, b in itertools.pairwise(rig.tg.drafts)]
        assert min(gaps) >= DRAFT_INTERVAL * 0.9, gaps
        [reply] = rig.chat()
        assert reply.visible_text == text.strip() and reply.edits == []
        assert len(sends_with(rig, "Hello!")) == 1
        assert rig.tg.calls("editMessageText") == []
        assert rig.tg.chat_actions == [], "the draft shows the text as it grows: no typing beside it"


async def test_a_tool_round_sends_its_text_then_the_status_line_then_drafts_anew(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.workdir.mkdir(parents=True, exist_ok=True)
        rig.llm.script(
            ToolCalls([("list_dir", {})], text="Looking around first."),
            Text("Nothing much here, really.", chunk_size=4, delay=0.02),
        )
        rig.say("what is here?")
        await rig.wait_turns(timeout=15)
        assert rig.texts() == ["Looking around first.", rig.texts()[1], "Nothing much here, really."]
        assert "list_dir" in rig.texts()[1] and "✓" in rig.texts()[1]
        rounds = {d.draft_id: d.visible_text for d in rig.tg.drafts}
        # each round streams into a draft of its own; one whose whole text (and its call) came
        # within FIRST_DRAFT_WAIT, as the first most often does, needs none
        *first_round, second_round = rounds.values()
        assert len(first_round) <= 1 and all("Looking around first.".startswith(t) for t in first_round)
        assert "Nothing much here, really.".startswith(second_round)
        status_line = str(rig.chat()[1].message_id)
        edited = {str(r.params.get("message_id")) for r in rig.tg.calls("editMessageText")}
        assert edited <= {status_line}, "only the status line is edited"


@pytest.mark.parametrize("refused_by", ["old server", "chat"])
async def test_a_refused_draft_falls_back_to_edits_and_is_not_tried_again(
    tmp_path: Path, refused_by: str
) -> None:
    text = "Streaming by edits, as before drafts. " * 6
    async with running_bot(tmp_path) as rig:
        rig.tg.refuse_drafts(None if refused_by == "old server" else CHAT)
        rig.llm.script(Text(text, chunk_size=12, delay=0.03), Text("And again by edits. " * 8, delay=0.02))
        rig.say("one")
        await rig.wait_turns(timeout=15)
        [refused] = draft_requests(rig)
        assert refused.status == (404 if refused_by == "old server" else 400)
        [first] = rig.chat()
        assert first.visible_text == text.strip() and first.edits, "streamed by edits instead"
        rig.say("two")
        await rig.wait_turns(2, timeout=15)
        assert len(draft_requests(rig)) == 1, "the chat's refusal is remembered"
        second = rig.chat()[-1]
        assert second.visible_text == ("And again by edits. " * 8).strip() and second.edits
        assert rig.tg.drafts == []


@pytest.mark.parametrize("status", [500, 502, 429])
async def test_a_draft_failing_for_a_moment_is_skipped_and_the_answer_arrives(
    tmp_path: Path, status: int
) -> None:
    text = "Still here after the hiccup. " * 10
    async with running_bot(tmp_path, telegram={"draft_interval": DRAFT_INTERVAL}) as rig:
        rig.tg.fail_next("sendMessageDraft", status=status, retry_after=1)
        rig.llm.script(Text(text, chunk_size=10, delay=0.05))  # ~1.5 s of streaming
        rig.say("hi")
        await rig.wait_turns(timeout=10)
        failed, *later = draft_requests(rig)
        assert failed.status == status
        assert later and all(r.status == 200 for r in later), "drafts go on: a failure is not a refusal"
        [reply] = rig.chat()
        assert reply.visible_text == text.strip() and reply.edits == []
        assert rig.tg.calls("editMessageText") == []
        if status == 429:
            assert later[0].time - failed.time >= 1.0, "a 429's retry_after spaces the next draft"


async def test_stop_during_a_draft_stream_says_stopped_and_sends_no_answer(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Hang(first_text="Let me think about", seconds=30))
        rig.say("write an essay")
        await rig.tg.wait_for(lambda: "Let me think about" in rig.tg.draft_texts(CHAT))
        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        await rig.wait_turns(timeout=15)
        await rig.llm.wait_stream_closed()
        assert [t for t in rig.texts() if "Let me think" in t] == [], "no stray final message"
        [stopped] = sends_with(rig, "Stopped.")
        assert [d.visible_text for d in rig.tg.drafts] == ["Let me think about"]
        assert all(d.time < stopped.time for d in rig.tg.drafts), "no draft after the stop"


async def test_drafts_off_streams_by_edits(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={"drafts": False}) as rig:
        rig.llm.script(Text("Edited into place. " * 20, chunk_size=10, delay=0.03))
        rig.say("hi")
        await rig.wait_turns(timeout=15)
        [reply] = rig.chat()
        assert reply.edits and rig.tg.calls("sendMessageDraft") == []


async def test_a_group_chat_never_gets_drafts(tmp_path: Path) -> None:
    """Groups hold no conversation, so no turn streams there today; delivery is fed the events a
    turn addressed to a group would emit, and must stream them by edits without trying a draft."""
    group = -100_500
    async with running_bot(tmp_path) as rig:
        rig.tg.add_chat(group, chat_type="supergroup")
        to = Address(session_id=1, source="chat", chat_id=group, language="en")
        text = "A group reply, streamed. " * 4
        rig.bot.delivery(TurnStarted(to=to, turn_id=1))
        for piece in (text[:30], text[30:60], text[60:]):
            rig.bot.delivery(TextDelta(to=to, turn_id=1, text=piece))
        await rig.tg.wait_for(lambda: bool(rig.tg.messages(group)))
        rig.bot.delivery(RoundEnded(to=to, turn_id=1, text=text, has_tool_calls=False))
        rig.bot.delivery(TurnFinished(to=to, turn_id=1, outcome=OutcomeKind.FINAL))
        await rig.bot.delivery.idle()
        [reply] = rig.tg.messages(group)
        assert reply.visible_text == text.strip() and reply.edits
        assert draft_requests(rig, group) == []
