"""A kill while one update of a batch is still in hand, after the others were handled: the offset
stored never passed the one in hand, so Telegram redelivers from there, and each message is
answered exactly once (issue 12: a batch's chats are handled side by side; issue 31: the offset
moves as updates are handled, never past one still in hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.crash.harness import crash_rig
from tests.fakes.openai_server import Hang, Reply, Text

SECOND_USER = ALLOWED_USER + 1
WORDS = ("one", "two")


def _answer_to(body: dict[str, Any]) -> str:
    said = [str(m.get("content")) for m in body["messages"] if m.get("role") == "user"]
    return next(f"Re: {word}." for word in WORDS if word in said[-1])


async def test_killed_before_the_batch_offset_is_stored_each_message_is_answered_once(
    tmp_path: Path,
) -> None:
    sections = {"telegram": {"allowed_user_ids": [ALLOWED_USER, SECOND_USER]}}
    async with crash_rig(tmp_path, **sections) as rig:

        def answer(body: dict[str, Any]) -> Reply:
            return Text(_answer_to(body)) if rig.starts > 1 else Hang(seconds=30)

        rig.llm.handler = answer
        # /help's reply hangs: chat A's lane, and so the batch, is not done when the bot dies
        rig.tg.fail_next("sendMessage", status=504, hang=30.0, when=lambda p: "/stop" in str(p.get("text")))
        await rig.start()
        first = rig.say("one")
        second = rig.tg.send_text(SECOND_USER, "two")
        help_id = rig.say("/help")
        mail = {f"tg:{first}", f"tg:{second}"}

        def both_handled() -> bool:
            stored = {row["envelope_id"] for row in rig.query("SELECT envelope_id FROM session_mail")}
            return mail <= stored and len(rig.llm.requests) >= 2

        await rig.wait(both_handled, "both chats' messages stored and their turns asking the model")
        offset = rig.query("SELECT value FROM kv_state WHERE key = 'telegram.update_offset'")
        assert not offset or int(offset[0]["value"]) <= help_id, "the offset never passes /help, in hand"
        await rig.kill()
        polls = len(rig.tg.calls("getUpdates"))

        await rig.start()
        await rig.wait_text("Re: one.")
        await rig.wait(lambda: _texts(rig, SECOND_USER).count("Re: two.") >= 1, "chat B's answer")
        await rig.wait(lambda: rig.count_containing("/stop") >= 1, "the redelivered /help answered")
        await rig.wait_settled(turns=2)
        await rig.wait(lambda: help_id not in rig.tg.unconfirmed(), "the batch confirmed")
        assert await rig.terminate() == 0
        assert int(rig.tg.calls("getUpdates")[polls].params.get("offset") or 0) <= help_id, "redelivered"
        assert rig.count("Re: one.") == 1 and _texts(rig, SECOND_USER).count("Re: two.") == 1
        assert rig.count_containing("/stop") == 1, "the reply that never went out is sent once"
        rig.assert_consistent(*WORDS)


def _texts(rig: Any, chat_id: int) -> list[str]:
    return [m.visible_text.strip() for m in rig.tg.messages(chat_id) if not m.deleted]
