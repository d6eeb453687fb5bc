"""tools.wrappers: each decorator, glob matching, chain order and labels, retries only when idempotent."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext
from agentgram.runtime.capabilities.tools.files import ReadFile
from agentgram.runtime.capabilities.tools.shell import ExecuteCmd
from agentgram.runtime.capabilities.tools.wrappers import CallSite, Wrappers, execute_tool, truncate
from agentgram.runtime.infra.config import WrapperSettings
from agentgram.runtime.infra.errors import ToolError
from tests.runtime.capabilities.tools.test_shell import live_members, wait_for


class NoArgs(ToolArgs):
    pass


class Flaky(Tool[NoArgs]):
    """Fails its first ``failures`` calls, then answers; counts its calls."""

    name = "flaky_read"
    description = "test tool"
    idempotent = True
    Args = NoArgs

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ToolError(f"failure {self.calls}")
        return f"ok after {self.calls} calls"


class FlakyWrite(Flaky):
    name = "flaky_write"
    idempotent = False


class LongFailure(Tool[NoArgs]):
    name = "long_failure"
    description = "test tool"
    Args = NoArgs

    async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
        raise ToolError("é" * 500)


def wrappers(*entries: dict[str, Any]) -> Wrappers:
    return Wrappers([WrapperSettings.model_validate(e) for e in entries], lambda name: None)


async def call(w: Wrappers, tool: Tool[Any], ctx: ToolContext, **arguments: Any) -> str:
    return await w.chain(tool).wrap(execute_tool)(CallSite(tool, arguments, ctx, "main"))


def log_hook(tmp_path: Path) -> str:
    """A before/after hook that appends its argv[1] to order.log in its cwd, and allows."""
    script = tmp_path / "hooks" / "log.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "with open('order.log', 'a') as f: f.write(sys.argv[1] + '\\n')\n"
        'print(\'{"action": "allow"}\')\n'
    )
    script.chmod(0o755)
    return "hooks/log.py"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path, session_id=7)


# --- chains ------------------------------------------------------------------------


def test_an_empty_chain_returns_the_base_itself() -> None:
    chain = wrappers({"match": {"tool": "read_*"}, "decorators": [{"timeout": {"seconds": 5}}]}).chain(
        ExecuteCmd()
    )
    assert chain.labels == ()
    assert chain.wrap(execute_tool) is execute_tool


def test_globs_pick_the_entries_and_every_match_applies_in_file_order() -> None:
    w = wrappers(
        {"match": {"tool": "*"}, "decorators": [{"truncate": {"max_bytes": 65536}}]},
        {"match": {"tool": "execute_*"}, "decorators": [{"timeout": {"seconds": 30}}]},
        {"match": {"tool": "read_file"}, "decorators": [{"retries": {"count": 2, "backoff_ms": 500}}]},
    )
    assert w.chain(ExecuteCmd()).labels == ("truncate(65536 B)", "timeout(30 s)")
    assert w.chain(ReadFile()).labels == ("truncate(65536 B)", "retries(2, backoff 500 ms)")
    assert w.chain(ExecuteCmd()) is w.chain(ExecuteCmd()), "chains are cached per tool name"


async def test_first_listed_is_outermost_across_entries_and_within_one(
    tmp_path: Path, ctx: ToolContext
) -> None:
    hook = log_hook(tmp_path)
    w = wrappers(
        {
            "match": {"tool": "*"},
            "decorators": [{"before": {"command": f"{hook} A"}}, {"after": {"command": f"{hook} B"}}],
        },
        {
            "match": {"tool": "execute_*"},
            "decorators": [{"after": {"command": f"{hook} C"}}, {"before": {"command": f"{hook} D"}}],
        },
    )
    result = await call(w, ExecuteCmd(), ctx, command="echo run >> order.log")
    assert result == "(no output)\nexit code: 0"
    # A(B(C(D(base)))): A and D decide before the call, C and B see it after, innermost first
    assert (tmp_path / "order.log").read_text().split() == ["A", "D", "run", "C", "B"]
    assert w.chain(ExecuteCmd()).labels == (
        f"before(command {hook} A)",
        f"after(command {hook} B)",
        f"after(command {hook} C)",
        f"before(command {hook} D)",
    )


# --- timeout -----------------------------------------------------------------------


async def test_timeout_stops_execute_cmd_and_its_process_group(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "execute_cmd"}, "decorators": [{"timeout": {"seconds": 0.5}}]})
    command = "echo $$ > pgid; sleep 30 & sleep 30"
    with pytest.raises(ToolError) as failure:
        await call(w, ExecuteCmd(), ctx, command=command)
    assert str(failure.value) == "timed out after 0.5 s (tools.wrappers timeout); the call was stopped"
    pgid = int((tmp_path / "pgid").read_text())
    await wait_for(lambda: not live_members(pgid))


async def test_timeout_lets_a_quick_call_through(ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "*"}, "decorators": [{"timeout": {"seconds": 10}}]})
    assert await call(w, ExecuteCmd(), ctx, command="echo hi") == "hi\nexit code: 0"


# --- retries -----------------------------------------------------------------------


async def test_retries_repeat_an_idempotent_tool_until_it_succeeds(ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "flaky_*"}, "decorators": [{"retries": {"count": 2, "backoff_ms": 1}}]})
    tool = Flaky(failures=2)
    assert await call(w, tool, ctx) == "ok after 3 calls"
    assert w.chain(tool).labels == ("retries(2, backoff 1 ms)",)


async def test_retries_give_up_with_the_last_failure(ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "flaky_*"}, "decorators": [{"retries": {"count": 1, "backoff_ms": 0}}]})
    tool = Flaky(failures=5)
    with pytest.raises(ToolError, match=r"^failure 2$"):
        await call(w, tool, ctx)
    assert tool.calls == 2


async def test_retries_skip_a_tool_that_is_not_idempotent(ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "flaky_*"}, "decorators": [{"retries": {"count": 3, "backoff_ms": 0}}]})
    tool = FlakyWrite(failures=1)
    with pytest.raises(ToolError, match=r"^failure 1$"):
        await call(w, tool, ctx)
    assert tool.calls == 1
    assert w.chain(tool).labels == ("retries(skipped: not idempotent)",)
    assert w.chain(tool).wrap(execute_tool) is execute_tool


async def test_retries_sit_outside_a_timeout_and_retry_it(ctx: ToolContext) -> None:
    """The usual stack: each attempt gets its own time limit."""

    class SlowOnce(Flaky):
        name = "slow_once"

        async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
            self.calls += 1
            if self.calls == 1:
                await asyncio.sleep(30)
            return "second attempt"

    w = wrappers(
        {
            "match": {"tool": "*"},
            "decorators": [{"retries": {"count": 1, "backoff_ms": 0}}, {"timeout": {"seconds": 0.2}}],
        }
    )
    assert await call(w, SlowOnce(0), ctx) == "second attempt"


# --- truncate ----------------------------------------------------------------------


async def test_truncate_cuts_a_result_on_a_character_boundary(tmp_path: Path, ctx: ToolContext) -> None:
    (tmp_path / "big.txt").write_text("ä" * 1000)  # 2000 bytes
    w = wrappers({"match": {"tool": "read_file"}, "decorators": [{"truncate": {"max_bytes": 301}}]})
    result = await call(w, ReadFile(), ctx, path="big.txt")
    body, marker = result.rsplit("\n", 1)
    assert len(result.encode()) <= 301
    assert set(body) == {"ä"}, "no half character, no replacement character"
    assert marker == f"[... truncated: {len(body.encode())} of 2000 bytes shown (tools.wrappers truncate)]"


async def test_truncate_leaves_a_short_result_alone(tmp_path: Path, ctx: ToolContext) -> None:
    (tmp_path / "small.txt").write_text("short\n")
    w = wrappers({"match": {"tool": "*"}, "decorators": [{"truncate": {"max_bytes": 128}}]})
    assert await call(w, ReadFile(), ctx, path="small.txt") == "short\n"


async def test_truncate_cuts_a_failure_message_too(ctx: ToolContext) -> None:
    w = wrappers({"match": {"tool": "*"}, "decorators": [{"truncate": {"max_bytes": 200}}]})
    with pytest.raises(ToolError) as failure:
        await call(w, LongFailure(), ctx)
    message = str(failure.value)
    assert len(message.encode()) <= 200
    assert message.endswith("of 1000 bytes shown (tools.wrappers truncate)]")


def test_truncate_at_the_smallest_configurable_size_still_fits_its_marker() -> None:
    cut = truncate("x" * 10_000, 128)
    assert len(cut.encode()) <= 128 and cut.startswith("x")
