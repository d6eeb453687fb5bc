"""``/now``, ``/after`` and ``/cancel`` in the terminal chat (issue 30): the same choices as the
bot's buttons, for the last message typed while the agent works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Text, ToolCalls
from tests.terminal.harness import terminal_rig

ALLOW_SHELL = {"rules": [{"tool": "execute_cmd", "action": "allow"}]}
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"


def _users(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


async def test_after_holds_the_typed_message_for_the_next_turn_and_now_starts_on_one(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path, approval=ALLOW_SHELL) as rig:
        workdir = tmp_path / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        rig.llm.script(
            ToolCalls([("execute_cmd", {"command": WAIT_FOR_GO})]),
            Text("First done."),
            Text("Summary done."),
            ToolCalls([("execute_cmd", {"command": WAIT_FOR_GO})]),
            Text("Hi!"),
        )
        rig.start()
        await rig.wait_for("type a message")
        rig.type("run the thing")
        await rig.llm.wait_for_requests(1, timeout=10)
        rig.type("then summarise")
        await rig.wait_for("/now — start on it now")
        rig.type("/after")
        await rig.wait_for("Will run next")
        (workdir / "go").touch()
        await rig.wait_for("Summary done.")
        assert "then summarise" not in "\n".join(_users(rig.llm.requests[1]))
        assert _users(rig.llm.requests[2])[-1] == "then summarise"

        (workdir / "go").unlink()
        rig.type("run it again")
        await rig.llm.wait_for_requests(4, timeout=10)
        rig.type("never mind, say hi")
        await rig.wait_for("/now — start on it now")
        rig.type("/now")
        await rig.wait_for("Hi!")
        assert _users(rig.llm.requests[4])[-1] == "never mind, say hi"
        rig.type("/cancel")
        await rig.wait_for("No message waits for the running turn.")
        rig.type("/exit")
        assert await rig.exited() == 0
