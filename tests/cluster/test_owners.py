"""Three instances in webhook mode behind one round-robin proxy, sharing the chats (issue 27 items
2, 5–8 and 13): each chat runs on the instance that claimed it first, every instance serves
Telegram's POSTs and relays an update of a chat another instance runs to that one. Every message is
answered once and in order, a press that lands on a non-owner works, two conflicting presses apply
once, the same update POSTed to two instances has one effect, an owner killed mid-turn or while
its approval prompt waits costs nothing (another instance claims the chat within the lease and
continues), and an owner paused past its lease is fenced when it wakes."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentgram.bot.telegram.core.webhook import SECRET_HEADER
from agentgram.bot.telegram.core.webhook_relay import RELAYED_HEADER
from agentgram.runtime.infra.lead import EXIT_LEAD_LOST
from tests.cluster.harness import TAKEOVER, WEBHOOK_PATH, WEBHOOK_SECRET, Cluster, Instance, cluster
from tests.conftest import ALLOWED_USER, DRIVERS, use_library
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls

USERS = [ALLOWED_USER + n for n in range(12)]


@pytest.fixture(autouse=True)
def _aiogram() -> Iterator[None]:
    """These instances run the aiogram driver (the suite's other modules run python-telegram-bot;
    the twelve-chat scenario runs with both): both drivers are covered without running every
    process-level scenario twice."""
    use_library("aiogram")
    yield
    use_library("ptb")


def _last_user(body: dict[str, Any]) -> str:
    said = [str(m.get("content")) for m in body["messages"] if m.get("role") == "user"]
    found = re.findall(r"chat \d+ msg \d", said[-1]) if said else []
    return found[-1] if found else "?"


def _mail(rig: Cluster) -> list[tuple[int, str]]:
    rows = rig.instances[0].query(
        "SELECT s.chat_id AS chat, m.envelope_id AS envelope FROM session_mail m "
        "JOIN sessions s ON s.id = m.session_id ORDER BY m.id"
    )
    return [(int(row["chat"]), str(row["envelope"])) for row in rows]


def _replied(rig: Cluster, user: int, needle: str) -> bool:
    return any(needle in m.visible_text for m in rig.tg.messages(user) if not m.deleted)


async def _post(
    instance: Instance,
    update: dict[str, Any] | bytes,
    *,
    relayed_by: str | None = None,
    secret: str | None = WEBHOOK_SECRET,
) -> int:
    """POST ``update`` to the instance's own listener, as Telegram (or another instance) would; the status."""
    assert instance.listen_url is not None
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    if relayed_by is not None:
        headers[RELAYED_HEADER] = relayed_by
    body = update if isinstance(update, bytes) else json.dumps(update).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(instance.listen_url, data=io.BytesIO(body), headers=headers) as answer,
    ):
        return answer.status


async def _health(instance: Instance) -> dict[str, Any]:
    assert instance.listen_url is not None
    url = instance.listen_url.removesuffix(WEBHOOK_PATH) + "/healthz"
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        return dict(await answer.json())


async def _three(rig: Cluster) -> tuple[Instance, Instance, Instance]:
    """Three instances started; ``a`` first, so it leads (runs the scheduler)."""
    a, b, c = rig.instances
    await a.start_leading()
    await b.start_member()
    await c.start_member()
    return a, b, c


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("library", DRIVERS)
async def test_twelve_chats_spread_over_three_instances_are_answered_once_and_in_order(
    tmp_path: Path, library: str
) -> None:
    use_library(library)  # this scenario with both drivers; the rest of the module with aiogram
    async with cluster(tmp_path, 3, proxy=True, telegram={"allowed_user_ids": USERS}) as rig:
        assert rig.proxy is not None
        rig.llm.handler = lambda body: Text(f"Got {_last_user(body)}.")
        a, b, c = await _three(rig)
        health = [await _health(i) for i in (a, b, c)]
        assert [h["role"] for h in health] == ["leader", "member", "member"]
        assert [(h["status"], h["heartbeat"]) for h in health] == [("ok", "ok")] * 3
        sent = {user: [rig.tg.send_text(user, f"chat {user} msg {n}") for n in range(5)] for user in USERS}
        for user in USERS:
            await a.wait(lambda u=user: _replied(rig, u, f"chat {u} msg 4"), f"chat {user} answered", 60)
        await a.wait(
            lambda: not rig.tg.unconfirmed() and a.all_turns_settled() and not a.unread_mail(), "idle"
        )
        stored = _mail(rig)
        for user in USERS:
            ids = [envelope for chat, envelope in stored if chat == user and envelope.startswith("tg:")]
            assert [int(envelope.split(":")[1]) for envelope in ids] == sent[user], "once each, in order"
            said = [
                str(m.get("content"))
                for body in rig.llm.requests
                for m in body["messages"]
                if m.get("role") == "user" and f"chat {user} " in str(m.get("content"))
            ]
            seen = [int(n) for text in said for n in re.findall(rf"chat {user} msg (\d)", text)]
            firsts = list(dict.fromkeys(seen))
            assert sorted(set(seen)) == list(range(5)) and firsts == sorted(firsts), seen
            answers = [m.visible_text for m in rig.tg.messages(user) if m.visible_text.startswith("Got ")]
            assert len(answers) == len(set(answers)), f"an answer shown twice: {answers}"
        delivered = [d.update_id for d in rig.tg.webhook_deliveries if d.status == 200]
        assert sorted(delivered) == sorted(u for ids in sent.values() for u in ids), "each confirmed once"
        owners = {user: rig.owner_of(user) for user in USERS}
        assert None not in owners.values(), "every chat is owned"
        running = {owner.name for owner in owners.values() if owner is not None}
        assert running == {"node-a", "node-b", "node-c"}, f"the chats are spread: {running}"
        for n in range(3):
            assert 200 in rig.proxy.statuses(n), "every instance took updates"
        names = [i.name for i in rig.instances]
        relayed = [
            f
            for f in rig.proxy.forwarded
            if f.status == 200 and f.chat in owners and names[f.upstream] != owners[f.chat].name  # type: ignore[union-attr]
        ]
        assert relayed, "updates that reached a non-owner were relayed to the owner and confirmed"
        assert rig.tg.calls("getUpdates") == []
        for instance in (c, b, a):
            assert await instance.terminate() == 0
        left = a.query("SELECT count(*) AS n FROM leases WHERE kind = 'chat' AND instance_id IS NOT NULL")
        assert left[0]["n"] == 0, "a graceful stop releases every chat"


async def test_presses_landing_on_non_owners_apply_once_and_a_conflicting_one_is_refused(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, 3, proxy=True) as rig:
        assert rig.proxy is not None
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        a, b, c = await _three(rig)
        rig.proxy.route(0)  # the chat's first update reaches a: a runs the chat
        a.say("run it")
        prompt = await a.wait_containing("Approval needed")
        assert rig.owner_of(ALLOWED_USER) is a
        await a.wait(
            lambda: bool(a.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)),
            "the prompt bound to its request",
        )
        approve, reject = prompt.button_data("Approve"), prompt.button_data("Reject")
        rig.proxy.route(1, 2)  # the approval lands on b, a conflicting reject on c: both relay to a
        pressed = rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve)
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, reject, require_button=False)
        await a.wait_text("Ran it.")
        await a.wait(lambda: not rig.tg.unanswered_callbacks(), "both presses answered")
        await a.wait_settled()
        assert rig.proxy.statuses(1)[-1:] == [200] and rig.proxy.statuses(2)[-1:] == [200]
        answers = [answer.text or "" for answer in rig.tg.callback_answers]
        assert len(answers) == 2 and "no longer pending" in answers[1], answers
        # the same press POSTed again to two instances at once (a proxy retry, a duplicate): no effect
        again = rig.tg.delivered_updates[pressed]
        statuses = await asyncio.gather(_post(b, again), _post(c, again))
        assert list(statuses) == [200, 200]
        await a.wait_settled()
        assert _lines(b.workdir / "marker.txt") == ["ran"], "the command ran once"
        assert [r["status"] for r in a.query("SELECT status FROM approval_requests")] == ["approved"]
        assert a.count("Ran it.") == 1
        # a relayed POST that reaches an instance which does not run the chat is refused, never
        # relayed on (no loops)
        assert await _post(c, again, relayed_by="node-b") == 503
        # a non-owner checks the secret and the body itself: 403 and nothing stored; 200 and a dead letter
        letters = len(a.query("SELECT id FROM dead_letters"))
        assert await _post(c, again, secret=None) == 403 and await _post(c, again, secret="wrong" * 8) == 403
        assert await _post(c, b"{not json") == 200
        assert len(a.query("SELECT id FROM dead_letters")) == letters + 1
        assert rig.owner_of(ALLOWED_USER) is a, "the chat stayed where it ran"
        for instance in (c, b, a):
            assert await instance.terminate() == 0
        a.assert_consistent("run it")


async def test_an_owner_killed_mid_turn_costs_no_message(tmp_path: Path) -> None:
    """The chat's owner (not the leader) is killed mid-turn; the proxy skips it, the others answer
    503 while its lease lasts (Telegram retries), one claims the chat, continues the turn, and every
    message is answered once."""
    async with cluster(tmp_path, 3, proxy=True) as rig:
        assert rig.proxy is not None
        asked: list[str] = []

        def answer(body: dict[str, Any]) -> Reply:
            asked.append(_texts(body))
            return Hang("Let me think", seconds=60) if len(asked) == 1 else Text(f"Answer {len(asked)}.")

        rig.llm.handler = answer
        a, b, c = await _three(rig)
        rig.proxy.route(1)
        b.say("what is 2+2?")
        await b.wait(lambda: b.drafted("Let me think"), "b's draft")
        assert rig.owner_of(ALLOWED_USER) is b
        await b.kill()
        for n in range(3):
            b.say(f"and {n}+{n}?")
        await a.wait(
            lambda: rig.owner_of(ALLOWED_USER) in (a, c), "another instance claims the chat", TAKEOVER
        )
        took = rig.owner_of(ALLOWED_USER)
        assert took is not None and took is not b
        await took.wait(lambda: not rig.tg.unconfirmed(), "every update confirmed", 60)
        await took.wait(lambda: any("and 2+2?" in text for text in asked), "the last message asked")
        await took.wait_settled()  # the resumed turn may have read the later messages, or not
        await took.wait(lambda: took.count(f"Answer {len(asked)}.") == 1, "the last answer shown")
        for n in range(2, len(asked) + 1):
            assert took.count(f"Answer {n}.") == 1, f"answer {n} shown once"
        for instance in (a, c):
            assert await instance.terminate() == 0
        took.assert_consistent("what is 2+2?", *(f"and {n}+{n}?" for n in range(3)))


async def test_an_approval_pressed_after_its_owner_died_runs_the_command_once(tmp_path: Path) -> None:
    async with cluster(tmp_path, 3, proxy=True) as rig:
        assert rig.proxy is not None
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        a, b, c = await _three(rig)
        rig.proxy.route(2)
        c.say("run it")
        prompt = await c.wait_containing("Approval needed")
        assert rig.owner_of(ALLOWED_USER) is c
        await c.wait(
            lambda: bool(c.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)),
            "the prompt bound to its request",
        )
        await c.kill()
        approve = prompt.button_data("Approve")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve)  # retried until someone claims
        await a.wait_text("Ran it.")
        took = rig.owner_of(ALLOWED_USER)
        assert took in (a, b)
        assert took is not None
        await took.wait_settled()
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)  # a second tap
        await took.wait(lambda: not rig.tg.unanswered_callbacks(), "both taps answered")
        await took.wait_settled()
        for instance in (a, b):
            assert await instance.terminate() == 0
        assert _lines(a.workdir / "marker.txt") == ["ran"]
        assert [r["status"] for r in a.query("SELECT status FROM approval_requests")] == ["approved"]
        assert a.count("Ran it.") == 1
        a.assert_consistent("run it")


async def test_an_owner_paused_past_its_lease_is_fenced_when_it_wakes(tmp_path: Path) -> None:
    async with cluster(tmp_path, 3, proxy=True) as rig:
        assert rig.proxy is not None
        rig.llm.script(Hang("Let me think", seconds=60), Text("Four."))
        a, b, c = await _three(rig)
        rig.proxy.route(1)
        b.say("what is 2+2?")
        await b.wait(lambda: b.drafted("Let me think"), "b's draft")
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGSTOP)  # a frozen VM, a long pause: its heartbeat stops
        try:
            await a.wait(
                lambda: rig.owner_of(ALLOWED_USER) in (a, c), "another instance claims the chat", TAKEOVER
            )
            await a.wait_text("Four.")
            await a.wait_settled()
            shown = len(a.chat())
            rows = a.query("SELECT count(*) AS n FROM chat_history")[0]["n"]
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
        code = await b.proc.wait()
        assert code == EXIT_LEAD_LOST, f"the woken owner exits ({code})"
        assert "another instance took" in b.log_text()
        assert len(a.chat()) == shown, "nothing the woken owner did reached the chat"
        assert a.query("SELECT count(*) AS n FROM chat_history")[0]["n"] == rows, "nor the stored history"
        assert a.count("Four.") == 1
        for instance in (a, c):
            assert await instance.terminate() == 0
        a.assert_consistent("what is 2+2?")


def _texts(body: dict[str, Any]) -> str:
    return " | ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "user")
