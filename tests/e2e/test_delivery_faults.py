"""What must reach the user does, whatever Telegram answers the first times.

Final answers, approval prompts, notices and reports are retried on 5xx,
timeouts and 429 until Telegram takes them; 403 and 400 are final. Notices and
reports are recorded before they are sent, so one a restart interrupted is
sent on the next start. Every path splits long text the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentgram.bot.telegram.views.delivery as delivery_module
from agentgram.runtime.infra.events import Address, CronResult, ModelText, Report
from agentgram.runtime.infra.storage.models import OutboxRow
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text


def says(needle: str):  # type: ignore[no-untyped-def]
    return lambda params: needle in str(params.get("text"))


def home(rig: Rig, session_id: int = 0) -> Address:
    rig.tg.add_chat(ALLOWED_USER)
    return Address(session_id=session_id, source="chat", chat_id=ALLOWED_USER, language="en")


async def unshown(rig: Rig) -> list[OutboxRow]:
    def read(tx: Any) -> list[OutboxRow]:
        from sqlmodel import col, select

        return list(tx.exec(select(OutboxRow).where(col(OutboxRow.delivered_at).is_(None))))

    return await rig.bot.runtime.parts.db.read_sync(read)


WHOLE = {"stream_first_delay": 5}
"""A quick reply goes out once, whole, as one sendMessage (no partial text, no edit)."""


async def test_a_final_answer_hit_by_502s_arrives_once(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=WHOLE) as rig:
        rig.tg.fail_next("sendMessage", status=502, times=3, when=says("The answer"))
        rig.llm.script(Text("The answer is 42."))
        rig.say("question")
        await rig.wait_text("The answer is 42.", timeout=10)
        await rig.wait_turns()
        assert [m.visible_text for m in rig.chat()].count("The answer is 42.") == 1
        refused = [c.status for c in rig.tg.calls("sendMessage") if says("The answer")(c.params)]
        assert refused == [502, 502, 502, 200]


async def test_a_429_on_the_final_answer_waits_its_retry_after(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={**WHOLE, "max_retries": 0}) as rig:
        rig.tg.fail_next("sendMessage", status=429, retry_after=1, when=says("Patience"))
        rig.llm.script(Text("Patience pays."))
        rig.say("question")
        await rig.wait_text("Patience pays.", timeout=10)
        calls = [c for c in rig.tg.calls("sendMessage") if says("Patience")(c.params)]
        assert [c.status for c in calls] == [429, 200]
        assert calls[1].time - calls[0].time >= 1.0


async def test_a_streamed_reply_whose_edits_failed_ends_with_the_complete_text(tmp_path: Path) -> None:
    text = " ".join(f"word{i}" for i in range(120))
    async with running_bot(tmp_path, telegram={"stream_edit_interval": 0.1, "stream_first_delay": 0}) as rig:
        rig.tg.refuse_drafts()  # a Bot API server without drafts: replies stream by edits
        rig.tg.fail_next("editMessageText", status=502, times=3)
        rig.llm.script(Text(text, chunk_size=40, delay=0.05))
        rig.say("stream it")
        await rig.wait_turns(timeout=15)
        replies = [m for m in rig.chat() if "word0" in m.visible_text]
        assert len(replies) == 1
        assert replies[0].visible_text == text
        assert [c.status for c in rig.tg.calls("editMessageText")][:3] == [502, 502, 502]


async def test_the_next_approval_prompt_appears_after_failed_edits(tmp_path: Path) -> None:
    from tests.e2e.test_approvals import shell, wait_prompt

    async with running_bot(tmp_path, telegram={"stream_edit_interval": 0.1, "stream_first_delay": 0}) as rig:
        rig.tg.refuse_drafts()  # a Bot API server without drafts: replies stream by edits
        rig.tg.fail_next("editMessageText", status=502, times=2)
        rig.llm.script(Text("Some streamed words first. " * 8, chunk_size=30, delay=0.05))
        rig.say("talk")
        await rig.wait_turns(timeout=10)
        rig.llm.script(shell("echo hi"))
        rig.say("now run something")
        await wait_prompt(rig)


async def test_notices_are_recorded_retried_in_order_and_marked_shown(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=502, times=2, when=says("Stopped"))
        runtime = rig.bot.runtime
        await runtime.parts.output.notice(home(rig), "stopped", {})
        await runtime.parts.output.notice(home(rig), "nothing-to-stop", {})
        await rig.wait_text("Nothing to stop", timeout=10)
        await rig.bot.delivery.idle()
        texts = rig.texts()
        assert texts.index("⏹ Stopped.") < texts.index(next(t for t in texts if "Nothing to stop" in t))
        assert await unshown(rig) == []


async def test_a_blocked_user_drops_the_send_and_the_outbox_goes_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=403, when=says("Stopped"))
        await rig.bot.runtime.parts.output.notice(home(rig), "stopped", {})
        await rig.bot.runtime.parts.output.notice(home(rig), "nothing-to-stop", {})
        await rig.wait_text("Nothing to stop")
        await rig.bot.delivery.idle()
        assert "⏹ Stopped." not in rig.texts()
        assert await unshown(rig) == [], "a refusal is final: it is not sent again on start"


async def test_a_notice_a_restart_kept_from_the_chat_is_sent_on_start(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.bot.runtime.parts.bus.emit = lambda event: None  # type: ignore[method-assign]  # killed before emitting
        await rig.bot.runtime.parts.output.notice(home(rig), "stopped", {})
        assert len(await unshown(rig)) == 1
        assert "⏹ Stopped." not in rig.texts()
    async with running_bot(tmp_path, known_chats=(ALLOWED_USER,)) as rig:
        await rig.wait_text("⏹ Stopped.")
        await rig.bot.delivery.idle()
        assert await unshown(rig) == []
    async with running_bot(tmp_path, known_chats=(ALLOWED_USER,)) as rig:
        rig.say("/help")
        await rig.wait_text("/stop")
        assert "⏹ Stopped." not in rig.texts(), "shown once, never again"


async def test_a_long_report_is_split_with_nothing_lost(tmp_path: Path) -> None:
    lines = [f"line {i}: " + "x" * 90 for i in range(120)]
    async with running_bot(tmp_path) as rig:
        nightly = CronResult(title="Nightly", body=ModelText(text="\n\n".join(lines)))
        await rig.bot.runtime.parts.output.publish(Report(to=home(rig), content=nightly))
        await rig.wait_text("line 119:")
        await rig.bot.delivery.idle()
        shown = "\n".join(rig.texts())
        assert len(rig.chat()) >= 3
        assert all(len(m.text) <= 4096 for m in rig.chat())
        assert all(line in shown for line in lines)
        assert "Nightly" in rig.texts()[0]


async def test_idle_outboxes_are_dropped_and_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_module, "IDLE_EVICT", 0.2)
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("First."), Text("Second."))
        rig.say("one")
        await rig.wait_text("First.")
        await rig.tg.wait_for(lambda: rig.bot.delivery.outboxes == {}, timeout=5)
        rig.say("two")
        await rig.wait_text("Second.")
        assert rig.bot.delivery.outboxes, "the next event makes a new outbox"
        await rig.tg.wait_for(lambda: rig.bot.delivery.outboxes == {}, timeout=5)


async def test_a_send_that_hangs_and_ends_in_504_is_sent_again(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=WHOLE) as rig:
        rig.tg.fail_next("sendMessage", status=504, hang=1.5, when=says("Slow network"))
        rig.llm.script(Text("Slow network, fine answer."))
        rig.say("question")
        await rig.wait_text("Slow network, fine answer.", timeout=15)
        await rig.wait_turns(timeout=15)
        assert rig.texts().count("Slow network, fine answer.") == 1


async def test_an_outcome_unknown_send_is_shown_at_least_once(tmp_path: Path) -> None:
    """Telegram delivered it, then the gateway timed out: the client cannot tell, so it sends
    again. At-least-once: the answer may appear twice, never zero times (see sender.py)."""
    async with running_bot(tmp_path, telegram=WHOLE) as rig:
        rig.tg.fail_next("sendMessage", status=504, hang=0.5, applied=True, when=says("Twice"))
        rig.llm.script(Text("Twice is better than never."))
        rig.say("question")
        await rig.wait_turns(timeout=15)
        assert rig.texts().count("Twice is better than never.") == 2
