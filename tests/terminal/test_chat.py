"""``agentgram chat`` in a real terminal against the fake LLM: a chat, an approval, a rejection
with a reason, Ctrl-C during a stream, and a restart (issue 18 §4)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.terminal.harness import terminal_rig


def _tool_results(body: dict) -> list[str]:  # type: ignore[type-arg]
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


async def test_a_reply_streams_and_is_rendered_as_markdown(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(Text("Here is **bold** and `code`.", chunk_size=4))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("hello")
        await rig.wait_for("Here is bold and code.")  # rendered: no ** and no backticks left
        assert any(
            m["role"] == "user" and "hello" in str(m["content"]) for m in rig.llm.requests[0]["messages"]
        )
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_an_approved_command_runs_and_its_result_reaches_the_model(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(
            ToolCalls([Call("execute_cmd", {"command": "echo hi-from-the-shell"})]), Text("It said hi.")
        )
        rig.start()
        await rig.wait_for("type a message")
        rig.type("say hi")
        await rig.wait_for("Approval needed")
        await rig.wait_for("approve?")
        rig.type("y")
        await rig.wait_for("It said hi.")
        assert any("hi-from-the-shell" in result for result in _tool_results(rig.llm.requests[1]))
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_a_rejection_with_a_reason_reaches_the_model(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(ToolCalls([Call("execute_cmd", {"command": "rm -rf build"})]), Text("Fine, I won't."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("clean up")
        await rig.wait_for("approve?")
        rig.type("n too risky")
        await rig.wait_for("Fine, I won't.")
        assert _tool_results(rig.llm.requests[1]) == ["User rejected this tool call. Reason: too risky"]
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_ctrl_c_during_a_stream_stops_the_turn_and_the_prompt_comes_back(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        words = " ".join(f"word{n}" for n in range(200))
        rig.llm.script(Text(words, chunk_size=6, delay=0.1), Text("Back again."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("talk slowly")
        await rig.wait_for("word1")  # streamed: shown live while the model still writes
        rig.interrupt()
        await rig.wait_for("Stopping")
        await rig.llm.wait_stream_closed(timeout=5)
        await rig.wait_for("Stopped.")
        assert "word199" not in rig.seen
        assert rig.query("SELECT status FROM turns")[0]["status"] == "cancelled"
        rig.type("are you there?")
        await rig.wait_for("Back again.")
        rig.interrupt()
        rig.interrupt()  # twice within 2 s: exit
        assert await rig.exited() == 0


async def test_a_restart_shows_the_last_exchange_and_keeps_the_session(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(Text("The capital is Paris."), Text("You asked about France."))
        rig.start()
        await rig.wait_for("type a message")
        rig.type("capital of France?")
        await rig.wait_for("The capital is Paris.")
        rig.type("/exit")
        assert await rig.exited() == 0
        rig.start()
        await rig.wait_for("earlier in this conversation")
        await rig.wait_for("capital of France?")
        await rig.wait_for("The capital is Paris.")
        rig.type("what did I ask?")
        await rig.wait_for("You asked about France.")
        contents = [str(m.get("content")) for m in rig.llm.requests[1]["messages"]]
        assert any("The capital is Paris." in c for c in contents)
        sessions = rig.query("SELECT id, source FROM sessions")
        assert [s["source"] for s in sessions] == ["terminal"]
        rig.type("/exit")
        assert await rig.exited() == 0


async def test_a_multi_line_answer_shows_as_lines_and_a_read_is_asked_in_words(tmp_path: Path) -> None:
    """Regressions (issue 25): the terminal joined a two-line answer on one line, where Telegram
    shows two; a read outside the workdir was asked as ``{ "path": … }``."""
    async with terminal_rig(tmp_path) as rig:
        rig.llm.script(
            ToolCalls([Call("read_file", {"path": "/etc/hostname"})]),
            Text("The result:\nalpha = 1\nbeta = 2"),
        )
        rig.start()
        await rig.wait_for("type a message")
        rig.type("read it")
        await rig.wait_for("Read a file outside the workdir: /etc/hostname")
        await rig.wait_for("approve?")
        rig.type("n not now")
        await rig.wait_for("beta = 2")
        await rig.wait_for("approve?", times=1)
        shown = [line.strip() for line in rig.seen.splitlines()]
        assert "alpha = 1" in shown and "beta = 2" in shown
        assert "The result: alpha = 1 beta = 2" not in rig.seen
        assert '"path"' not in rig.seen
        rig.type("/exit")
        assert await rig.exited() == 0
