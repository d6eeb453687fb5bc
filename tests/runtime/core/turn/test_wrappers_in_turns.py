"""Tool wrappers in real turns (issue 14 req. 6): applied in one place, recorded with each call.

The decorators themselves are tested in ``tests/runtime/tools``; here the runtime wires them
from ``tools.wrappers`` around the calls the model makes, live and resumed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.storage.models import ToolCallStatus
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import started_runtime

GUARD = f"""#!{sys.executable}
import json, sys
call = json.load(sys.stdin)
command = call["arguments"].get("command", "")
with open("hook.log", "a") as log:
    log.write(call["tool"] + " " + call["source"] + " " + call["agent"] + "\\n")
if "rm -rf" in command:
    print(json.dumps({{"action": "deny", "reason": "no recursive deletes"}}))
elif command == "date":
    print(json.dumps({{"action": "rewrite", "arguments": {{"command": "echo rewritten"}}}}))
elif command == "cached":
    print(json.dumps({{"action": "answer", "result": "from the cache"}}))
else:
    print(json.dumps({{"action": "allow"}}))
"""


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def settings(tmp_path: Path, llm: FakeOpenAI, wrappers: list[dict[str, Any]]) -> Any:
    return make_settings(
        tmp_path,
        llm.base_url,
        tools={"wrappers": wrappers},
        approval={"rules": [{"tool": "execute_cmd", "action": "allow"}]},
    )


async def test_a_before_hook_denies_rewrites_and_answers_calls_and_the_chain_is_recorded(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    workdir = tmp_path / "workspace"
    (workdir / "hooks").mkdir(parents=True)
    hook = workdir / "hooks" / "guard.py"
    hook.write_text(GUARD)
    hook.chmod(0o755)
    fake_llm.script(
        ToolCalls(
            [
                Call("execute_cmd", {"command": "rm -rf build"}, id="c_rm"),
                Call("execute_cmd", {"command": "date"}, id="c_date"),
                Call("execute_cmd", {"command": "cached"}, id="c_cache"),
                Call("execute_cmd", {"command": "printf 'x%.0s' $(seq 1 500)"}, id="c_long"),
            ]
        ),
        Text("done"),
    )
    wrappers = [
        {"match": {"tool": "*"}, "decorators": [{"truncate": {"max_bytes": 200}}]},
        {"match": {"tool": "execute_*"}, "decorators": [{"before": {"command": "hooks/guard.py"}}]},
    ]
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, wrappers))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "go", envelope_id="u1")
        await rec.wait_kind("turn_finished", timeout=20)
        denied, rewritten, answered, cut = tool_results(fake_llm.requests[1])
        assert "no recursive deletes" in denied
        assert rewritten == "rewritten\nexit code: 0"
        assert answered == "from the cache"
        assert len(cut.encode()) <= 200 and "truncated" in cut
        assert (workdir / "hook.log").read_text().splitlines() == ["execute_cmd chat main"] * 4
        rows = {c: await runtime.parts.history.call_by_model_id(session.id, c) for c in ("c_rm", "c_date")}
        assert rows["c_rm"] is not None and rows["c_rm"].status == ToolCallStatus.REJECTED
        assert rows["c_date"] is not None and rows["c_date"].status == ToolCallStatus.DONE
        assert json.loads(rows["c_date"].wrappers or "[]") == [
            "truncate(200 B)",
            "before(command hooks/guard.py)",
        ]
    finally:
        await runtime.close()


async def test_a_call_no_wrapper_matches_records_no_chain(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("list_dir", {"path": "."}, id="c_ls")]), Text("ok"))
    wrappers = [{"match": {"tool": "execute_*"}, "decorators": [{"timeout": {"seconds": 5}}]}]
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, wrappers))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "go", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        row = await runtime.parts.history.call_by_model_id(session.id, "c_ls")
        assert row is not None and row.status == ToolCallStatus.DONE and row.wrappers is None
    finally:
        await runtime.close()


def test_a_hook_naming_an_unknown_tool_is_a_config_error_naming_the_key(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    wrappers = [{"match": {"tool": "*"}, "decorators": [{"after": {"tool": "audit_log"}}]}]
    with pytest.raises(ConfigError) as caught:
        Runtime(settings(tmp_path, fake_llm, wrappers))
    assert caught.value.key == "tools.wrappers.0.decorators.0.after.tool"
    assert "audit_log" in str(caught.value)


def test_check_config_knows_every_tool_a_runtime_registers(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    from agentgram.runtime.app import runtime_tool_names

    config = settings(tmp_path, fake_llm, [])
    assert runtime_tool_names(config) == frozenset(Runtime(config).parts.tools.names())


def test_the_tools_a_lazy_mcp_server_adds_are_known_to_check_config_alike(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """One list (``runtime.app.runtime_tools``): ``activate_tools`` is registered and known exactly
    when an enabled server is lazy."""
    from agentgram.runtime.app import runtime_tool_names

    off = {"command": "x", "enabled": False, "lazy": True}
    for servers, has_activate in [
        ({"off": off}, False),
        ({"off": off, "on": {"command": "x", "lazy": True}}, True),
    ]:
        config = make_settings(tmp_path, fake_llm.base_url, mcp={"servers": servers})
        names = runtime_tool_names(config)
        assert names == frozenset(Runtime(config).parts.tools.names())
        assert ("activate_tools" in names) is has_activate
