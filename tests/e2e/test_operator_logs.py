"""The operator's log lines: one per turn, approval decision, scheduled run, LLM and Telegram error.

They carry facts (ids, outcome, counts, classes, statuses), never the conversation.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.scheduler.models import TicRunStatus
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.e2e.test_approvals import shell, tap, wait_prompt
from tests.e2e.test_schedule import TIC, tics, until, write_tic_md
from tests.fakes.openai_server import Error, Text, ToolCalls


def lines(caplog: pytest.LogCaptureFixture, logger: str, start: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == f"agentgram.{logger}" and r.getMessage().startswith(start)]


async def test_a_turn_logs_one_info_line_with_its_facts_and_not_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    async with running_bot(tmp_path) as rig:
        rig.workdir.mkdir(parents=True, exist_ok=True)
        (rig.workdir / "notes.md").write_text("buy milk")
        read: list[tuple[str, dict[str, Any] | str]] = [("read_file", {"path": "notes.md"})]
        rig.llm.script(ToolCalls(read), Text("Secret plans: milk."))
        rig.say("read my private diary notes")
        await rig.wait_turns()
    [turn] = lines(caplog, "turn", "turn ")
    message = turn.getMessage()
    assert turn.levelno == logging.INFO
    assert f"chat={ALLOWED_USER} " in message and " session=" in message
    assert " outcome=final rounds=2 tools=read_file tokens=20/10 took=" in message
    assert message.endswith("s")
    assert turn.__dict__["tokens_in"] == 20 and turn.__dict__["outcome"] == "final"
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert "private diary" not in everything and "Secret plans" not in everything


async def test_an_approval_decision_is_logged_with_how_it_was_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
    [decision] = lines(caplog, "approvals", "approval ")
    request, session = decision.__dict__["request"], decision.__dict__["session"]
    assert request
    assert decision.getMessage() == (
        f"approval {request} tool=execute_cmd decision=approved how=button session={session}"
    )


async def test_a_tic_run_is_logged_with_its_outcome_and_duration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    write_tic_md(tmp_path, "- anything new in the inbox?\n")
    async with running_bot(tmp_path, tic=TIC) as rig:
        rig.tg.add_chat(ALLOWED_USER)
        done = tics(rig)
        rig.llm.handler = lambda body: Text("TIC_OK")
        await until(rig, lambda: any(t.status == TicRunStatus.RAN for t in done))
    ran = lines(caplog, "scheduler", "tic run=")
    assert ran and " outcome=final delivered=False took=" in ran[0].getMessage()


async def test_an_llm_401_is_logged_with_its_class_and_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Error(401, "Incorrect API key provided"))
        rig.say("hi")
        await rig.wait_turns()
    [error] = lines(caplog, "turn", "llm error ")
    assert error.levelno >= logging.INFO
    assert "kind=auth-failed status=401" in error.getMessage()
    assert error.__dict__["status"] == 401
    [turn] = lines(caplog, "turn", "turn ")
    assert " outcome=failed " in turn.getMessage()


async def test_a_cron_run_is_logged_with_its_job_outcome_and_duration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.e2e.test_schedule import listed

    caplog.set_level(logging.INFO, logger="agentgram")
    async with running_bot(tmp_path) as rig:
        rig.say("/cron add every 1m check the weather in Berlin")
        await rig.wait_text("Scheduled “check the weather in Berlin”")
        rig.say("/cron")
        item = await listed(rig, "check the weather in Berlin")
        rig.llm.script(Text("Sunny."))
        tap(rig, item, "▶️ Run now")
        await until(rig, lambda: bool(lines(caplog, "scheduler", "cron job ")))
    [run] = lines(caplog, "scheduler", "cron job ")
    assert run.levelno == logging.INFO
    assert run.getMessage().startswith("cron job 1 'check the weather in Berlin' run=1 outcome=success took=")
    assert run.__dict__["job"] == 1 and run.__dict__["outcome"] == "success"


async def test_a_telegram_error_is_logged_with_its_class_and_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
        rig.say("/help")
        await rig.tg.wait_for(lambda: bool(lines(caplog, "telegram.send", "send to chat")))
    [refused] = lines(caplog, "telegram.send", "send to chat")
    assert refused.levelno == logging.WARNING
    assert "BadRequest status=400" in refused.getMessage()
    assert refused.__dict__["error_class"] == "BadRequest" and refused.__dict__["status"] == 400
