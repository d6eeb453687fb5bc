"""``agentgram chat`` with a bot token: the Telegram bot runs in the same process, on the same
runtime; each adapter shows only its own sessions' output, and leaving the terminal stops both."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ALLOWED_USER
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import FakeTelegram
from tests.terminal.harness import terminal_rig


async def test_the_terminal_and_the_bot_share_one_runtime_and_keep_their_output_apart(tmp_path: Path) -> None:
    tg = FakeTelegram()
    await tg.start()
    try:
        async with terminal_rig(tmp_path, tg_root=tg.root) as rig:
            rig.llm.script(Text("Terminal answer."), Text("Telegram answer."))
            rig.start()
            await rig.wait_for("type a message")
            rig.type("from the terminal")
            await rig.wait_for("Terminal answer.")
            tg.send_text(ALLOWED_USER, "from Telegram")
            await tg.wait_for(
                lambda: any("Telegram answer." in m.visible_text for m in tg.messages(ALLOWED_USER)),
                timeout=15,
            )
            assert not any("Terminal answer." in m.visible_text for m in tg.messages(ALLOWED_USER))
            assert "Telegram answer." not in rig.seen
            sources = [row["source"] for row in rig.query("SELECT source FROM sessions ORDER BY id")]
            assert sources == ["terminal", "chat"]
            rig.type("/exit")
            assert await rig.exited() == 0
    finally:
        await tg.stop()
