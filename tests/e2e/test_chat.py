"""A conversation through the real python-telegram-bot and openai SDK, over HTTP fakes."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

from agentgram.runtime.infra.storage.models import utcnow
from tests.conftest import ALLOWED_USER, STRANGER, also_on_postgres
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_html import parse_html


@also_on_postgres
async def test_streamed_reply_is_edited_into_place(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.refuse_drafts()  # a Bot API server without drafts: the edit path (tests/e2e/test_drafts.py)
        rig.llm.script(Text("Hello! " * 30, chunk_size=10, delay=0.05))
        rig.say("hi")
        await rig.wait_turns()
        replies = [m for m in rig.chat() if "Hello!" in m.visible_text]
        assert len(replies) == 1
        assert replies[0].visible_text.strip() == ("Hello! " * 30).strip()
        assert replies[0].edits, "the reply should have been streamed by edits"
        assert rig.tg.chat_actions == [], "the message shows the text as it grows: no typing beside it"


async def test_tool_round_trip_shows_one_status_line(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.workdir.mkdir(parents=True, exist_ok=True)
        (rig.workdir / "notes.md").write_text("buy milk")
        rig.llm.script(ToolCalls([("read_file", {"path": "notes.md"}), ("list_dir", {})]), Text("Milk."))
        rig.say("read my notes")
        await rig.wait_turns()
        status = [m for m in rig.chat() if "read_file" in m.visible_text]
        assert len(status) == 1
        assert "notes.md" in status[0].visible_text and "✓" in status[0].visible_text
        assert "list_dir" in status[0].visible_text
        assert rig.texts()[-1] == "Milk."


async def test_stranger_is_refused_once_and_never_reaches_the_model(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.send_text(STRANGER, "hello")
        rig.tg.send_text(STRANGER, "hello again")
        rig.say("/help")
        await rig.wait_text("/stop")
        await rig.tg.wait_for(lambda: len(rig.tg.messages(STRANGER)) >= 1)
        assert len(rig.tg.messages(STRANGER)) == 1
        assert rig.llm.calls == 0


async def test_long_reply_is_split_with_nothing_lost(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum " * 40).strip() for i in range(22)]
    reply = "\n\n".join(paragraphs)
    assert len(reply) > 10_000
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text(reply, chunk_size=500))
        rig.say("write a lot")
        await rig.wait_turns()
        pieces = [m for m in rig.chat() if "Paragraph" in m.visible_text]
        assert len(pieces) >= 3
        assert all(len(m.visible_text) <= 4096 for m in pieces)
        joined = "".join(m.visible_text for m in pieces)
        assert "".join(joined.split()) == "".join(reply.split())


async def test_markdown_with_specials_renders_valid_html(tmp_path: Path) -> None:
    reply = "Use `a < b && c > d` here:\n\n```python\nif x < 3 and y & 1:\n    print('<ok>')\n```\n\n**Done** & dusted"
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text(reply))
        rig.say("show code")
        await rig.wait_turns()
        message = rig.chat()[-1]
        assert message.parse_mode == "HTML"
        parse_html(message.text or "")
        assert '<pre><code class="language-python">' in (message.text or "")
        assert "a < b && c > d" in message.visible_text and "<ok>" in message.visible_text


async def test_429_is_honoured_and_nothing_is_lost(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=429, retry_after=1)
        rig.llm.script(Text("after the flood"))
        rig.say("hi")
        await rig.wait_turns(timeout=10)
        await rig.wait_text("after the flood", timeout=10)
        attempts = rig.tg.calls("sendMessage")
        assert len(attempts) >= 2


async def test_unknown_command_gets_help_and_no_model_call(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/frobnicate")
        await rig.wait_text("/new")
        assert rig.llm.calls == 0


async def test_sticker_gets_not_supported(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.send_sticker(ALLOWED_USER)
        await rig.wait_text("stickers")
        assert rig.llm.calls == 0


async def test_streaming_edits_respect_the_edit_interval(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:  # stream_edit_interval is 0.2 s in tests
        rig.tg.refuse_drafts()  # edits are how a chat without drafts streams
        rig.llm.script(Text("word " * 200, chunk_size=5, delay=0.005))
        rig.say("stream a lot")
        await rig.wait_turns()
        reply = next(m for m in rig.chat() if "word" in m.visible_text)
        edits = [
            r.time
            for r in rig.tg.calls("editMessageText")
            if str(r.params.get("message_id")) == str(reply.message_id)
        ]
        assert len(edits) >= 3
        streaming = edits[:-1]  # the final text goes out at once: one short burst, which Telegram allows
        gaps = [b - a for a, b in itertools.pairwise(streaming)]
        assert min(gaps) >= 0.2 * 0.9, gaps
        assert reply.visible_text.split() == ["word"] * 200


async def test_a_reply_complete_within_the_first_delay_is_one_message(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={"stream_first_delay": 0.5}) as rig:
        rig.tg.refuse_drafts()  # the delay holds only where replies stream by edits
        rig.llm.script(Text("A quick answer, streamed in small pieces.", chunk_size=4, delay=0.01))
        rig.say("quick?")
        await rig.wait_turns()
        [reply] = [m for m in rig.chat() if "quick answer" in m.visible_text]
        assert reply.visible_text == "A quick answer, streamed in small pieces."
        assert reply.edits == [], "sent once, complete: no message-then-edit"
        assert rig.tg.calls("editMessageText") == []


async def test_a_slow_reply_shows_its_first_text_after_the_delay_then_streams(tmp_path: Path) -> None:
    words = "Thinking about it step by step. " * 6
    async with running_bot(tmp_path, telegram={"stream_first_delay": 0.3}) as rig:
        rig.tg.refuse_drafts()  # the delay holds only where replies stream by edits
        rig.llm.script(Text(words, chunk_size=8, delay=0.04))  # ~1 s of streaming
        rig.say("slow?")
        first = await rig.wait_text("Thinking")
        partial = first.visible_text
        assert 0 < len(partial) < len(words.strip()), "the first text is a part, shown while streaming"
        assert len(partial) >= 8 * 3, "it waited for the delay rather than showing the first chunk"
        await rig.wait_turns()
        reply = rig.tg.message(ALLOWED_USER, first.message_id)
        assert reply.visible_text == words.strip() and reply.edits


async def test_a_shown_answer_is_marked_delivered_and_a_refused_one_is_not(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={"stream_first_delay": 5}) as rig:
        rig.llm.script(Text("First."), Text("Second."))
        rig.say("one")
        await rig.wait_turns()
        rig.tg.fail_next(
            "sendMessage",
            status=400,
            description="Bad Request: chat not found",
            when=lambda params: "Second." in str(params.get("text")),
        )
        rig.say("two")
        await rig.wait_turns(2)
        session = await rig.bot.runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
        rows = [
            r for r in await rig.bot.runtime.parts.history.all_rows(session.id or 0) if r.role == "assistant"
        ]
        assert [(r.content, r.delivered_at is not None) for r in rows] == [
            ("First.", True),
            ("Second.", False),
        ]
        since = utcnow() - timedelta(hours=1)
        assert [r.content for r in await rig.bot.runtime.parts.history.undelivered_answers(since)] == [
            "Second."
        ]
