"""A round does not wait for an MCP server's start (review finding: a hung start stalled every
round): it offers the tools already listed and lists a missing server in the background; only the
first round that needs a never-tried server waits, at most the server's ``timeout``, once."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgram.runtime.capabilities.mcp.servers import ServerState
from agentgram.runtime.infra.storage.grant_rows import ROOT_FRAME
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.capabilities.mcp.conftest import TIME_SERVER
from tests.runtime.capabilities.mcp.test_lazy import offered
from tests.runtime.core.turn.harness import started_runtime

HANGING = {"command": sys.executable, "args": ["-c", "import time; time.sleep(999)"], "timeout": 1}


async def poll_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_granted_server_that_hangs_on_start_delays_only_the_first_request_by_its_timeout(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(Text("hello"), Text("again"))
    config = make_settings(tmp_path, fake_llm.base_url, mcp={"servers": {"hang": HANGING}})
    runtime, rec = await started_runtime(config)
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.parts.mcp_catalog.grants.grant(session.id, ROOT_FRAME, ["hang"])  # as before a restart
        began = time.monotonic()
        await runtime.chat.post_user_message(session, "hi", envelope_id="u1")
        await fake_llm.wait_for_requests(1, timeout=30)
        assert time.monotonic() - began < 2, "one wait of the server's 1s timeout, not its start's 60s"
        await rec.wait_kind("turn_finished", timeout=30)
        assert not any(name.startswith("mcp__hang__") for name in offered(fake_llm.requests[0]))
        began = time.monotonic()
        await runtime.chat.post_user_message(session, "hi again", envelope_id="u2")
        await fake_llm.wait_for_requests(2, timeout=30)
        assert time.monotonic() - began < 0.8, "no round waits for it again"
        await rec.wait_kind("turn_finished", 2, timeout=30)
        server = runtime.parts.mcp.get("hang")
        assert server is not None and server.state is not ServerState.RUNNING  # still starting
    finally:
        await runtime.close()  # cancels the start under way in the background


async def test_an_eager_server_that_failed_at_start_is_listed_in_the_background_for_a_later_round(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    script = tmp_path / "time-server"
    server_config: dict[str, Any] = {"command": str(script), "args": [], "lazy": False, "timeout": 30}
    config = make_settings(tmp_path, fake_llm.base_url, mcp={"servers": {"time": server_config}})
    fake_llm.script(Text("no tools yet"), Text("now with tools"))
    runtime, rec = await started_runtime(config)
    try:
        server = runtime.parts.mcp.get("time")
        assert server is not None and server.state is ServerState.FAILED
        script.write_text(f"#!/bin/sh\nexec {sys.executable} {' '.join(TIME_SERVER['args'])}\n")
        script.chmod(0o755)
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "first", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=30)
        assert "mcp__time__get_current_time" not in offered(fake_llm.requests[0])
        await poll_until(lambda: server.listed is not None)
        await runtime.chat.post_user_message(session, "second", envelope_id="u2")
        await rec.wait_kind("turn_finished", 2, timeout=30)
        assert "mcp__time__get_current_time" in offered(fake_llm.requests[1])
    finally:
        await runtime.close()
