"""A crash during the summary call of a compaction leaves the history exactly as it was."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.core.turn.compaction import INSTRUCTIONS, SUMMARY_HEADER
from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import RESTARTED, crash_rig
from tests.fakes.openai_server import Hang, Text

pytestmark = ONE_DRIVER  # the driver takes no part in what is killed and recovered here

COMPACTION = {"compaction": {"threshold_tokens": 1000, "keep_recent": 2}}


def _is_summary_request(body: dict[str, object]) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and bool(messages) and messages[0].get("content") == INSTRUCTIONS


async def test_killed_during_the_summary_call_the_history_is_untouched_and_compaction_runs_again(
    tmp_path: Path,
) -> None:
    async with crash_rig(tmp_path, llm=COMPACTION) as rig:
        rig.llm.script(
            Text("First answer.", usage=(5000, 5)),  # measured past the threshold
            Hang("", seconds=60),  # turn 2's prefetched request, dropped once the turn compacts
            Hang("", seconds=60),  # the summary call, killed
        )
        await rig.start()
        rig.say("first question")
        await rig.wait_text("First answer.")
        rig.say("second question")
        await rig.wait(lambda: any(_is_summary_request(b) for b in rig.llm.requests), "the summary call")
        history = [
            tuple(r) for r in rig.query("SELECT id, role, content, status FROM chat_history ORDER BY id")
        ]
        await rig.kill()

        assert rig.query("SELECT * FROM history_summaries") == [], "no summary without its answer"
        after_kill = [
            tuple(r) for r in rig.query("SELECT id, role, content, status FROM chat_history ORDER BY id")
        ]
        assert after_kill == history, "the history is exactly as it was"

        rig.llm.script(Text("Both questions were about testing."), Text("Second answer."))
        await rig.start()
        await rig.wait_text("Second answer.")
        await rig.wait_containing(RESTARTED)
        await rig.wait_settled(2)
        assert await rig.terminate() == 0

        [summary] = rig.query("SELECT * FROM history_summaries")
        assert summary["content"] == "Both questions were about testing."
        last = rig.llm.requests[-1]["messages"]
        assert last[1]["role"] == "system" and str(last[1]["content"]).startswith(SUMMARY_HEADER)
        assert rig.count("Second answer.") == 1
        rig.assert_consistent("first question", "second question")
