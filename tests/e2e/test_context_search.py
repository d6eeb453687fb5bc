"""/search, /context and /compact through the real bot, between the fake Bot API and the fake OpenAI."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text

COMPACTION = {"compaction": {"threshold_tokens": 1000, "keep_recent": 2}}


async def test_search_finds_what_was_said_before_new_and_a_button_opens_the_exchange(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("Noted: the staging database listens on port 6543."), Text("Hi again!"))
        rig.say("Remember: the staging database listens on port 6543")
        await rig.wait_turns(1)
        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        rig.say("hello")
        await rig.wait_turns(2)

        rig.say("/search staging port")
        found = await rig.wait_text("🔎")
        assert "<b>staging</b>" in (found.text or "") and "<b>port</b>" in (found.text or "")
        assert "6543" in found.visible_text
        rig.tg.press_button(ALLOWED_USER, found.message_id, found.button_data("📖 1"))
        exchange = await rig.wait_text("🗂")
        assert "You: Remember: the staging database listens on port 6543" in exchange.visible_text
        assert "Answer: Noted: the staging database listens on port 6543." in exchange.visible_text

        rig.say("/search kangaroo")
        await rig.wait_text("kangaroo")
        assert len(rig.llm.requests) == 2, "searching asks the model nothing"


async def test_context_shows_the_budget_and_compact_summarises_the_older_history(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm=COMPACTION) as rig:
        rig.llm.script(
            Text("First answer.", usage=(900, 5)),
            Text("Second answer.", usage=(950, 5)),
            Text("The user asked two questions; both were answered."),  # the /compact call
        )
        rig.say("first question")
        await rig.wait_turns(1)
        rig.say("second question")
        await rig.wait_turns(2)

        rig.say("/context")
        shown = await rig.wait_text("🧠")
        # the reported 950, plus "Second answer." (14 characters) since that request
        assert "about 953 tokens (as the model reported)" in shown.visible_text
        assert "Compaction at 1,000 tokens" in shown.visible_text
        assert "No summary yet" in shown.visible_text

        rig.say("/compact")
        done = await rig.wait_text("📝 Done")
        assert "2 older messages" in done.visible_text
        summary_request = rig.llm.requests[-1]
        assert "first question" in str(summary_request["messages"][-1]["content"])

        rig.say("/context")
        await rig.tg.wait_for(lambda: sum("🧠" in t for t in rig.texts()) == 2)
        latest = [m for m in rig.chat() if "🧠" in m.visible_text][-1]
        assert "A summary stands for the 2 oldest messages" in latest.visible_text
