"""An active/standby cluster in polling mode on one real PostgreSQL database (issue 27 items 4–8):
one instance leads (polls, runs the turns, sends the outbox, runs the scheduler); a standby takes
over within the lease's ttl when the leader dies or stops, continues what it left, and a leader
paused past its lease is fenced: when it wakes, nothing it does reaches the chat or the database.
Webhook mode, where the instances share the chats, is ``test_owners``.

Every scenario checks that each message is answered once, that every approved command ran once,
and that no living instance was told 409 Conflict (exactly one polls)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from agentgram.runtime.infra.lead import EXIT_LEAD_LOST
from tests.cluster.harness import LEASE_TTL, TAKEOVER, Cluster, Instance, cluster
from tests.conftest import ALLOWED_USER, DRIVERS, use_library
from tests.crash.harness import RESTARTED
from tests.fakes.openai_server import Hang, Text, ToolCalls


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _leader_mid_turn(rig: Cluster) -> tuple[Instance, Instance]:
    """The leader and the standby, started; the leader streams its answer to "what is 2+2?", whose
    model call hangs (the next one answers "Four.")."""
    a, b = rig.instances
    rig.llm.script(Hang("Let me think", seconds=60), Text("Four."))
    await a.start()
    await b.start_standby()
    a.say("what is 2+2?")
    await a.wait(lambda: a.drafted("Let me think"), "the leader's draft")
    return a, b


async def test_a_standby_waits_while_the_leader_answers(tmp_path: Path) -> None:
    async with cluster(tmp_path) as rig:
        a, b = rig.instances
        rig.llm.script(Text("Pong one."), Text("Pong two."))
        await a.start()
        await b.start_standby()
        polls = len(rig.tg.calls("getUpdates"))
        a.say("ping one")
        await a.wait_text("Pong one.")
        a.say("ping two")
        await a.wait_text("Pong two.")
        await a.wait_settled(2)
        assert a.leads() and not b.leads()
        assert "agentgram is running" not in b.log_text(), "a standby does not poll or serve"
        assert len(rig.tg.calls("getUpdates")) > polls
        assert await b.terminate() == 0, "a standby stops at once"
        assert await a.terminate() == 0
        assert a.count("Pong one.") == 1 and a.count("Pong two.") == 1
        assert rig.conflicts_seen() == []
        a.assert_consistent("ping one", "ping two")


@pytest.mark.parametrize("library", DRIVERS)
async def test_the_standby_continues_a_killed_leaders_turn_within_the_ttl(
    tmp_path: Path, library: str
) -> None:
    """The one scenario of this module run with both drivers: the takeover, as the rest, is the
    runtime's, but the continued turn's messages go through the driver."""
    use_library(library)
    try:
        await _takeover_after_a_kill(tmp_path)
    finally:
        use_library("ptb")


async def _takeover_after_a_kill(tmp_path: Path) -> None:
    async with cluster(tmp_path) as rig:
        a, b = await _leader_mid_turn(rig)
        await a.kill()
        took = await b.wait_lead()
        assert took <= TAKEOVER, f"the takeover took {took:.1f}s"
        await b.wait_text("Four.")
        await b.wait_containing(RESTARTED)
        await b.wait_settled()
        b.say("and 3+3?")
        rig.llm.script(Text("Six."))
        await b.wait_text("Six.")
        await b.wait_settled(2)
        assert await b.terminate() == 0
        assert b.count("Four.") == 1 and b.count("Six.") == 1
        assert b.count_containing(RESTARTED) == 1
        assert rig.conflicts_seen() == []
        b.assert_consistent("what is 2+2?", "and 3+3?")


async def test_an_approval_pressed_after_the_leader_died_runs_the_command_once(tmp_path: Path) -> None:
    async with cluster(tmp_path) as rig:
        a, b = rig.instances
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        await a.start()
        await b.start_standby()
        a.say("run it")
        prompt = await a.wait_containing("Approval needed")
        await a.wait(
            lambda: bool(a.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)),
            "the prompt bound to its request",
        )
        await a.kill()
        await b.wait_lead()
        approve = prompt.button_data("Approve")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve)
        await b.wait_text("Ran it.")
        await b.wait_settled()
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)  # a second tap
        await b.wait(lambda: not rig.tg.unanswered_callbacks(), "both taps answered")
        await b.wait_settled()
        assert await b.terminate() == 0
        assert lines(b.workdir / "marker.txt") == ["ran"]
        assert [r["status"] for r in b.query("SELECT status FROM approval_requests")] == ["approved"]
        assert b.count("Ran it.") == 1
        b.assert_consistent("run it")


async def test_a_graceful_stop_hands_the_lead_over_at_once(tmp_path: Path) -> None:
    async with cluster(tmp_path) as rig:
        a, b = rig.instances
        rig.llm.script(Text("Hello."))
        await a.start()
        await b.start_standby()
        started = time.monotonic()
        assert await a.terminate() == 0
        await b.wait_lead()
        assert time.monotonic() - started < LEASE_TTL, "released at once, not after the ttl"
        b.say("hi")
        await b.wait_text("Hello.")
        await b.wait_settled()
        assert await b.terminate() == 0
        assert rig.conflicts_seen() == []
        b.assert_consistent("hi")


async def test_a_leader_paused_past_its_lease_is_fenced_when_it_wakes(tmp_path: Path) -> None:
    async with cluster(tmp_path) as rig:
        a, b = await _leader_mid_turn(rig)
        assert a.proc is not None
        os.kill(a.proc.pid, signal.SIGSTOP)  # a frozen VM, a long pause: its heartbeat stops
        try:
            await b.wait_lead()
            await b.wait_text("Four.")
            await b.wait_settled()
            shown = len(a.chat())
            rows = b.query("SELECT count(*) AS n FROM chat_history")[0]["n"]
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        code = await a.proc.wait()
        assert code == EXIT_LEAD_LOST, f"the woken leader exits ({code})"
        assert "took the lead" in a.log_text()
        assert len(a.chat()) == shown, "nothing the woken leader did reached the chat"
        assert b.query("SELECT count(*) AS n FROM chat_history")[0]["n"] == rows, "nor the stored history"
        assert b.count("Four.") == 1
        assert await b.terminate() == 0
        b.assert_consistent("what is 2+2?")
