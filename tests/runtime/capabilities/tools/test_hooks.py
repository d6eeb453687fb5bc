"""before/after hooks: allow, deny, rewrite, answer; fail closed; after hooks watch; tool hooks.

Every command hook is a real script (``#!python``) in the test's workdir, named
by a relative path as an operator would write it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext
from agentgram.runtime.capabilities.tools.shell import ExecuteCmd
from agentgram.runtime.capabilities.tools.wrappers import CallSite, HookDenied, Wrappers, execute_tool
from agentgram.runtime.infra.config import WrapperSettings
from agentgram.runtime.infra.errors import ToolError
from tests.runtime.capabilities.tools.test_shell import live_members, wait_for


def hook(tmp_path: Path, body: str, name: str = "hook.py") -> str:
    """Write a Python hook script into ``hooks/`` and return its relative path."""
    script = tmp_path / "hooks" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    script.chmod(0o755)
    return f"hooks/{name}"


def answering(answer: object) -> str:
    """A hook body that keeps its payload in payload.json and prints ``answer``."""
    return f"open('payload.json', 'w').write(sys.stdin.read())\nprint({json.dumps(json.dumps(answer))})"


def wrapped(stage: str, tools: dict[str, Tool[Any]] | None = None, **target: Any) -> Wrappers:
    entry = {"match": {"tool": "*"}, "decorators": [{stage: target}]}
    return Wrappers([WrapperSettings.model_validate(entry)], (tools or {}).get)


async def call(w: Wrappers, tool: Tool[Any], ctx: ToolContext, **arguments: Any) -> str:
    return await w.chain(tool).wrap(execute_tool)(CallSite(tool, arguments, ctx, "main"))


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path, session_id=42, source="chat")


# --- before: the four answers -------------------------------------------------------


async def test_allow_runs_the_call_and_the_hook_sees_what_the_model_sent(
    tmp_path: Path, ctx: ToolContext
) -> None:
    w = wrapped("before", command=hook(tmp_path, answering({"action": "allow"})))
    assert await call(w, ExecuteCmd(), ctx, command="echo hi") == "hi\nexit code: 0"
    assert json.loads((tmp_path / "payload.json").read_text()) == {
        "tool": "execute_cmd",
        "arguments": {"command": "echo hi"},
        "session": 42,
        "source": "chat",
        "agent": "main",
    }


async def test_deny_refuses_the_call_with_the_hooks_reason(tmp_path: Path, ctx: ToolContext) -> None:
    command = hook(tmp_path, answering({"action": "deny", "reason": "no deploys on Friday"}))
    w = wrapped("before", command=command)
    with pytest.raises(HookDenied) as denied:
        await call(w, ExecuteCmd(), ctx, command="touch ran")
    assert str(denied.value) == f"denied by the before hook (command {command}): no deploys on Friday"
    assert not (tmp_path / "ran").exists()


async def test_rewrite_runs_the_call_with_the_new_arguments(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped(
        "before",
        command=hook(tmp_path, answering({"action": "rewrite", "arguments": {"command": "echo safe"}})),
    )
    assert await call(w, ExecuteCmd(), ctx, command="echo risky") == "safe\nexit code: 0"


async def test_a_rewrite_is_parsed_again_like_the_models_arguments(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped(
        "before", command=hook(tmp_path, answering({"action": "rewrite", "arguments": {"cmd": "ls"}}))
    )
    with pytest.raises(ToolError, match="invalid arguments"):
        await call(w, ExecuteCmd(), ctx, command="echo hi")


async def test_answer_replaces_the_call(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped(
        "before", command=hook(tmp_path, answering({"action": "answer", "result": "cached: 3 files"}))
    )
    assert await call(w, ExecuteCmd(), ctx, command="touch ran") == "cached: 3 files"
    assert not (tmp_path / "ran").exists()


# --- before: fail closed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("raise SystemExit(1/0)", "it exited with code 1"),
        ("print(json.dumps({'action': 'allow'})); sys.exit(3)", "it exited with code 3"),
        ("print('allow')", "its answer is not a valid verdict"),
        ("pass", "it printed nothing"),
        ("print(json.dumps({'action': 'maybe'}))", "its answer is not a valid verdict"),
        (
            "print(json.dumps({'action': 'deny'}))",
            "its answer is not a valid verdict (deny.reason: Field required)",
        ),
        ("print(json.dumps([{'action': 'allow'}]))", "its answer is not a valid verdict"),
    ],
    ids=["crash", "non-zero-exit", "bad-json", "empty", "unknown-action", "missing-field", "not-an-object"],
)
async def test_a_broken_before_hook_denies(
    tmp_path: Path, ctx: ToolContext, caplog: pytest.LogCaptureFixture, body: str, problem: str
) -> None:
    w = wrapped("before", command=hook(tmp_path, body))
    with caplog.at_level(logging.WARNING, "agentgram.tools.hooks"), pytest.raises(HookDenied) as denied:
        await call(w, ExecuteCmd(), ctx, command="touch ran")
    assert problem in str(denied.value)
    assert str(denied.value).endswith("(a failing before hook denies the call)")
    assert not (tmp_path / "ran").exists()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


async def test_a_crashing_hooks_stderr_goes_to_the_log_not_to_the_model(
    tmp_path: Path, ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    w = wrapped("before", command=hook(tmp_path, "raise RuntimeError('the guard database is down')"))
    with caplog.at_level(logging.WARNING, "agentgram.tools.hooks"), pytest.raises(HookDenied) as denied:
        await call(w, ExecuteCmd(), ctx, command="true")
    assert "database" not in str(denied.value)
    assert "RuntimeError: the guard database is down" in caplog.text


async def test_a_hook_that_misses_its_timeout_denies_and_its_process_group_is_gone(
    tmp_path: Path, ctx: ToolContext
) -> None:
    body = "import subprocess\nsubprocess.Popen(['sleep', '30'])\nopen('pgid', 'w').write(str(os.getpgrp()))\ntime.sleep(30)"
    w = wrapped("before", command=hook(tmp_path, body), timeout=0.5)
    with pytest.raises(HookDenied, match=r"did not answer within 0\.5 s"):
        await call(w, ExecuteCmd(), ctx, command="touch ran")
    assert not (tmp_path / "ran").exists()
    pgid = int((tmp_path / "pgid").read_text())
    assert not live_members(pgid), "the hook and its child are gone when the call returns"


async def test_cancelling_a_call_stops_its_hook(tmp_path: Path, ctx: ToolContext) -> None:
    body = "open('pgid', 'w').write(str(os.getpgrp()))\ntime.sleep(30)"
    w = wrapped("before", command=hook(tmp_path, body), timeout=60)
    task = asyncio.create_task(call(w, ExecuteCmd(), ctx, command="true"))
    await wait_for(lambda: (tmp_path / "pgid").exists() and bool((tmp_path / "pgid").read_text()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not live_members(int((tmp_path / "pgid").read_text()))


async def test_a_missing_hook_command_denies(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped("before", command="hooks/nowhere.py")
    with pytest.raises(HookDenied, match="exited with code 127"):
        await call(w, ExecuteCmd(), ctx, command="true")


# --- after ---------------------------------------------------------------------------


async def test_an_after_hook_sees_the_result_and_cannot_change_it(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped("after", command=hook(tmp_path, answering({"action": "answer", "result": "changed"})))
    assert await call(w, ExecuteCmd(), ctx, command="echo hi") == "hi\nexit code: 0"
    seen = json.loads((tmp_path / "payload.json").read_text())
    assert seen["status"] == "done" and seen["result"] == "hi\nexit code: 0"
    assert seen["arguments"] == {"command": "echo hi"} and seen["session"] == 42


async def test_an_after_hook_sees_a_failure_which_still_fails(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped("after", command=hook(tmp_path, answering({})))
    with pytest.raises(ToolError, match="does not exist"):
        await call(w, ExecuteCmd(), ctx, command="true", workdir="missing")
    seen = json.loads((tmp_path / "payload.json").read_text())
    assert seen["status"] == "failed" and "does not exist" in seen["result"]


async def test_a_failing_after_hook_is_logged_and_ignored(
    tmp_path: Path, ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    w = wrapped("after", command=hook(tmp_path, "sys.exit(2)"))
    with caplog.at_level(logging.WARNING, "agentgram.tools.hooks"):
        assert await call(w, ExecuteCmd(), ctx, command="echo hi") == "hi\nexit code: 0"
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "exited with code 2" in record.getMessage()


# --- tool hooks ----------------------------------------------------------------------


class GuardArgs(ToolArgs):
    tool: str
    arguments: dict[str, Any]
    session: int
    source: str
    agent: str


class Guard(Tool[GuardArgs]):
    """A hook tool: denies any command that mentions rm, allows the rest."""

    name = "command_guard"
    description = "test hook tool"
    Args = GuardArgs

    async def execute(self, args: GuardArgs, ctx: ToolContext) -> str:
        if "rm" in str(args.arguments.get("command", "")).split():
            return json.dumps({"action": "deny", "reason": f"{args.agent} may not delete files"})
        return json.dumps({"action": "allow"})


class NarrowArgs(ToolArgs):
    tool: str
    arguments: dict[str, Any]


class Narrow(Tool[NarrowArgs]):
    """A hook tool whose arguments leave out most of the payload: every call to it is refused."""

    name = "narrow_guard"
    description = "test hook tool"
    Args = NarrowArgs

    async def execute(self, args: NarrowArgs, ctx: ToolContext) -> str:
        return json.dumps({"action": "allow"})


async def test_a_tool_hook_decides_in_the_calls_context(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped("before", {"command_guard": Guard()}, tool="command_guard")
    assert await call(w, ExecuteCmd(), ctx, command="echo kept") == "kept\nexit code: 0"
    (tmp_path / "precious").write_text("x")
    with pytest.raises(HookDenied, match=r"\(tool command_guard\): main may not delete files$"):
        await call(w, ExecuteCmd(), ctx, command="rm precious")
    assert (tmp_path / "precious").exists()


async def test_a_tool_hook_that_rejects_the_payload_denies(tmp_path: Path, ctx: ToolContext) -> None:
    w = wrapped("before", {"narrow_guard": Narrow()}, tool="narrow_guard")
    with pytest.raises(HookDenied, match="the tool failed: invalid arguments: session: Extra inputs"):
        await call(w, ExecuteCmd(), ctx, command="touch ran")
    assert not (tmp_path / "ran").exists()


async def test_an_after_tool_hook_gets_status_and_result_as_arguments(ctx: ToolContext) -> None:
    seen: list[GuardArgs] = []

    class AuditArgs(GuardArgs):
        status: str
        result: str

    class Audit(Tool[AuditArgs]):
        name = "audit"
        description = "test hook tool"
        Args = AuditArgs

        async def execute(self, args: AuditArgs, ctx: ToolContext) -> str:
            seen.append(args)
            return "ignored"

    w = wrapped("after", {"audit": Audit()}, tool="audit")
    assert await call(w, ExecuteCmd(), ctx, command="echo hi") == "hi\nexit code: 0"
    [args] = seen
    assert isinstance(args, AuditArgs) and (args.status, args.result) == ("done", "hi\nexit code: 0")


async def test_an_unknown_hook_tool_is_reported_and_denies(ctx: ToolContext) -> None:
    w = wrapped("before", {}, tool="no_such_guard")
    assert w.unknown_hook_tools() == [("tools.wrappers.0.decorators.0.before.tool", "no_such_guard")]
    with pytest.raises(HookDenied, match="there is no tool called 'no_such_guard'"):
        await call(w, ExecuteCmd(), ctx, command="true")


def test_check_config_and_run_word_an_unknown_hook_tool_alike(tmp_path: Path) -> None:
    """One check, one wording (issue 24): ``check-config`` (:func:`runtime.app.unknown_hook_tools`,
    by the tools a runtime registers) and ``run`` (:meth:`Wrappers.hook_problems` on the live
    registry) report the same line."""
    from agentgram.runtime.app import unknown_hook_tools
    from tests.conftest import make_settings

    wrappers = [{"match": {"tool": "*"}, "decorators": [{"before": {"tool": "no_such_guard"}}]}]
    settings = make_settings(tmp_path, "http://127.0.0.1:9", tools={"wrappers": wrappers})
    [checked] = unknown_hook_tools(settings)
    [at_run] = wrapped("before", {}, tool="no_such_guard").hook_problems()
    assert (checked.key, checked.problem) == (at_run.key, at_run.problem)
    assert str(at_run) == (
        "config error: tools.wrappers.0.decorators.0.before.tool: no tool named 'no_such_guard' (hooks may name any registered tool)"
    )
    assert (
        wrapped("before", {}, tool="no_such_guard").hook_problems(lambda name: name == "no_such_guard") == []
    )
