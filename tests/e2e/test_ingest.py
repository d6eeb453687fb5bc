"""The ingest loop's offset: a plain message stores it in the same transaction as its mail
(one write per message); any other update stores it after its handlers ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.bot.telegram.core.ingest import OFFSET_KEY
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text


async def test_a_message_and_its_offset_are_stored_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_bot(tmp_path) as rig:
        stored_apart: list[str] = []
        store = rig.bot.ingest.store
        original = store.set_value

        async def spy(key: str, value: str) -> None:
            stored_apart.append(value)
            await original(key, value)

        monkeypatch.setattr(store, "set_value", spy)
        rig.llm.script(Text("Hello there."))
        update_id = rig.say("hello")
        await rig.wait_turns()
        assert await store.get_value(OFFSET_KEY) == str(update_id + 1)
        assert stored_apart == [], "the offset rode along with the message's mail"

        help_id = rig.say("/help")
        await rig.tg.wait_for(lambda: stored_apart != [], timeout=5.0)
        assert stored_apart == [str(help_id + 1)], "a command with no mail stores its offset itself"
        assert await store.get_value(OFFSET_KEY) == str(help_id + 1)
