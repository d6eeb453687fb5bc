"""``/sessions``: the sessions open in this chat. In a forum one line per topic that has been spoken
in, named as the topic (``Team › Ideas``), with its session id, the line of the topic the command
came from marked, the answer landing in that topic; in a private chat its one session. Both
drivers run these (the suite's driver parameter), through the fake Bot API's forum topics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text

FORUM = -1001234567890
TELEGRAM: dict[str, Any] = {"groups": {"allowed_chat_ids": [FORUM]}}


def _in(rig: Any, thread: int | None) -> list[str]:
    return [m.visible_text for m in rig.tg.messages_in(FORUM, thread)]


def _listing(texts: list[str]) -> str:
    return next(text for text in texts if text.startswith("Sessions open in this chat"))


async def test_sessions_in_a_topic_lists_every_topic_by_name_and_answers_in_that_topic(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(FORUM, title="Team", forum=True)
        ideas, bugs = rig.tg.add_topic(FORUM, "Ideas"), rig.tg.add_topic(FORUM, "Bugs")
        rig.llm.script(Text("An idea answer."), Text("A bug answer."))
        rig.tg.send_text(ALLOWED_USER, "idea: a solar roof", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: "An idea answer." in _in(rig, ideas))
        rig.tg.send_text(ALLOWED_USER, "bug: login fails", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: "A bug answer." in _in(rig, bugs))
        await rig.wait_turns(2)

        rig.tg.send_text(ALLOWED_USER, "/sessions", chat_id=FORUM, thread_id=bugs)
        await rig.tg.wait_for(lambda: any(t.startswith("Sessions open") for t in _in(rig, bugs)))
        listing = _listing(_in(rig, bugs))
        lines = listing.splitlines()[1:]
        assert len(lines) == 2, listing
        idea_line, bug_line = sorted(lines, key=lambda line: "Bugs" in line)
        assert "Team › Ideas" in idea_line and "Team › Bugs" in bug_line
        assert bug_line.endswith("← here") and "← here" not in idea_line, "the topic asked from is marked"
        ids = [int(found) for found in re.findall(r"session (\d+)", listing)]
        assert len(set(ids)) == 2, "each topic is a session of its own"
        assert all("last message" in line for line in lines)
        assert rig.llm.calls == 2, "the command never reaches the model"
        assert not any(t.startswith("Sessions open") for t in _in(rig, ideas) + _in(rig, None)), (
            "the answer lands only in the topic asked from"
        )


async def test_sessions_in_a_private_chat_shows_its_one_session(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        rig.say("/sessions")
        reply = await rig.wait_text("Sessions open in this chat")
        lines = reply.visible_text.splitlines()[1:]
        assert len(lines) == 1, reply.visible_text
        (line,) = lines
        assert "this chat" in line and "session 1" in line and "last message" in line
        assert line.endswith("← here")


async def test_sessions_before_anything_was_said_says_none_is_open(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/sessions")
        await rig.wait_text("No session is open in this chat yet.")
