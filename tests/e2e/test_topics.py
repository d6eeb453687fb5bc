"""Forum topics (issue 28): in a forum supergroup each topic is its own session, with its own
history, /stop and queue; every bot message for a topic carries its ``message_thread_id``; a topic
closed or deleted stops its output without a retry loop; the system prompt names the group and
the topic. Both drivers run these (the suite's driver parameter); the fake Bot API checks the
thread of every send and refuses closed and deleted topics as Telegram does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import fakes, running_bot
from tests.fakes.openai_server import Hang, Text, ToolCalls

FORUM = -1001234567890
TELEGRAM: dict[str, Any] = {"groups": {"allowed_chat_ids": [FORUM]}}


def _in(rig: Any, thread: int | None) -> list[str]:
    """The visible texts of the bot's messages in one topic (None: General)."""
    return [m.visible_text for m in rig.tg.messages_in(FORUM, thread)]


def _said(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "user")


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def _forum(rig: Any) -> tuple[int, int]:
    rig.tg.add_group(FORUM, title="Team", forum=True)
    return rig.tg.add_topic(FORUM, "Ideas"), rig.tg.add_topic(FORUM, "Bugs")


async def test_two_topics_keep_their_own_histories_and_every_message_lands_in_its_topic(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.llm.script(Text("An idea answer."), Text("A bug answer."), Text("Second idea answer."))
        rig.tg.send_text(ALLOWED_USER, "idea: a solar roof", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: "An idea answer." in _in(rig, ideas))
        # a plain message in a topic the bot opened still needs a mention (it only looks like a reply)
        rig.tg.send_text(ALLOWED_USER, "chatter in bugs", chat_id=FORUM, thread_id=bugs)
        rig.tg.send_text(ALLOWED_USER, "bug: login fails", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: "A bug answer." in _in(rig, bugs))
        rig.tg.send_text(ALLOWED_USER, "another idea", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: "Second idea answer." in _in(rig, ideas))
        await rig.wait_turns(3)

        first, bug, second = rig.llm.requests
        assert "solar roof" not in _said(bug) and "chatter" not in _said(bug), (
            "the bug topic has its own history"
        )
        assert "solar roof" in _said(second) and "login fails" not in _said(second)
        assert "“Team › Ideas”" in _system(first) and "“Team › Bugs”" in _system(bug)
        assert _in(rig, ideas) == ["An idea answer.", "Second idea answer."]
        assert _in(rig, bugs) == ["A bug answer."]
        assert _in(rig, None) == [], "nothing for a topic lands in General"
        sends = [r for r in rig.tg.requests if r.method.lower() in ("sendmessage", "sendchataction")]
        assert all(r.params.get("message_thread_id") for r in sends), "every send names its topic"


async def test_stop_in_one_topic_leaves_the_other_running(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.llm.script(Hang("Thinking about ideas", seconds=30), Hang("Thinking about bugs", seconds=2))
        rig.tg.send_text(ALLOWED_USER, "think about ideas", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: rig.llm.calls == 1)
        rig.tg.send_text(ALLOWED_USER, "think about bugs", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: rig.llm.calls == 2)
        rig.tg.send_text(ALLOWED_USER, "/stop", chat_id=FORUM, thread_id=ideas)
        await rig.tg.wait_for(lambda: "⏹ Stopped." in _in(rig, ideas))
        assert "⏹ Stopped." not in _in(rig, bugs)
        # the other topic's turn was not touched: its model call runs to its end and is answered
        await rig.wait_turns(2, timeout=10)
        assert rig.llm.calls == 2
        assert not any("Stopped" in text for text in _in(rig, bugs))
        assert any("Thinking about bugs" in text for text in _in(rig, bugs))


async def test_a_closed_topic_stops_its_output_without_a_loop_and_works_again_when_reopened(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.llm.script(Text("A late answer.", delay=1.0))
        rig.tg.send_text(ALLOWED_USER, "take your time", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: rig.llm.calls == 1)
        rig.tg.close_topic(FORUM, ideas)
        await rig.wait_turns(1, timeout=10)
        refused = [r for r in rig.tg.requests if r.description and "TOPIC_CLOSED" in r.description]
        assert refused, "the answer met the closed topic"
        await asyncio.sleep(1.5)  # a loop would keep sending meanwhile
        again = [r for r in rig.tg.requests if r.description and "TOPIC_CLOSED" in r.description]
        assert len(again) == len(refused) <= 2, "a closed topic is not a transient failure"
        assert "A late answer." not in _in(rig, ideas)

        rig.llm.script(Text("Bugs still work."), Text("Ideas are open again."))
        rig.tg.send_text(ALLOWED_USER, "any bugs?", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: "Bugs still work." in _in(rig, bugs))
        rig.tg.reopen_topic(FORUM, ideas)
        rig.tg.send_text(ALLOWED_USER, "back?", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: "Ideas are open again." in _in(rig, ideas))


async def test_a_deleted_topic_drops_its_output_once_and_the_rest_goes_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.llm.script(Text("Nobody will read this.", delay=1.0), Text("Bugs answered."))
        rig.tg.send_text(ALLOWED_USER, "slow one", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.tg.wait_for(lambda: rig.llm.calls == 1)
        rig.tg.delete_topic(FORUM, ideas)
        await rig.wait_turns(1, timeout=10)
        rig.tg.send_text(ALLOWED_USER, "still there?", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: "Bugs answered." in _in(rig, bugs))
        gone = [r for r in rig.tg.requests if r.description and "thread not found" in r.description]
        assert 1 <= len(gone) <= 2
        assert _in(rig, None) == [], "a deleted topic's output does not fall back to General"


async def test_a_prompt_in_a_topic_lands_there_replying_to_the_asker(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        rig.tg.send_text(ALLOWED_USER, "run it please", chat_id=FORUM, thread_id=bugs, mention=True)
        await rig.tg.wait_for(lambda: any("Approval needed" in t for t in _in(rig, bugs)))
        prompt = next(m for m in rig.tg.messages_in(FORUM, bugs) if "Approval needed" in m.visible_text)
        bots = {m.message_id for m in rig.tg.messages(FORUM)}
        assert prompt.reply_to_message_id is not None and prompt.reply_to_message_id not in bots, (
            "the prompt replies to the asker's message"
        )
        assert _in(rig, ideas) == [] and _in(rig, None) == []
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"), chat_id=FORUM)
        await rig.tg.wait_for(lambda: "Ran it." in _in(rig, bugs))
        assert (rig.workdir / "marker.txt").read_text() == "ran\n"


RESEARCHER = """\
---
description: finds facts
tools: [read_file, list_dir]
---
You are the researcher. Answer with the fact only.
"""


async def test_a_topic_runs_its_configured_agent_and_instructions_and_the_others_do_not(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "workspace" / "agents" / "researcher"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(RESEARCHER)
    async with fakes() as (tg, llm):
        tg.add_group(FORUM, title="Team", forum=True)
        ideas, bugs = tg.add_topic(FORUM, "Ideas"), tg.add_topic(FORUM, "Bugs")
        topic = {"agent": "researcher", "prompt": "Cite a source for every fact."}
        telegram = {"groups": {"allowed_chat_ids": [FORUM], "topics": {FORUM: {ideas: topic}}}}
        async with running_bot(tmp_path, telegram=telegram, on=(tg, llm)) as rig:
            await _ask_both(rig, ideas, bugs)


async def _ask_both(rig: Any, ideas: int, bugs: int) -> None:
    """The configured topic (Ideas) and a plain one (Bugs) each answer once; their requests."""
    rig.llm.script(Text("Fact: 42 [guide]."), Text("A bug answer."))
    rig.tg.send_text(ALLOWED_USER, "what is the answer?", chat_id=FORUM, thread_id=ideas, mention=True)
    await rig.tg.wait_for(lambda: "Fact: 42 [guide]." in _in(rig, ideas))
    rig.tg.send_text(ALLOWED_USER, "login fails", chat_id=FORUM, thread_id=bugs, mention=True)
    await rig.tg.wait_for(lambda: "A bug answer." in _in(rig, bugs))

    researcher, main = rig.llm.requests
    system = _system(researcher)
    assert system.startswith("You are the researcher."), system
    assert "Cite a source for every fact." in system and "“Team › Ideas”" in system
    assert "Telegram" in system, "the topic's agent answers the chat: it gets the format rules"
    assert sorted(t["function"]["name"] for t in researcher["tools"]) == ["list_dir", "read_file"]
    assert "researcher" not in _system(main) and "Cite a source" not in _system(main)
    assert len(main["tools"]) > 2
