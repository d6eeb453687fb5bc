"""Three instances in webhook mode behind one round-robin proxy (issue 27 items 2, 7 and 13): every
instance serves Telegram's POSTs, a standby relays each update to the leader, and the leader
handles it as if Telegram had sent it there. Every message is answered once and in order, a
press that lands on a standby works, two conflicting presses apply once, the same update POSTed
to two instances has one effect, and the leader's death costs nothing (Telegram's retries reach
the new leader through the proxy)."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentgram.bot.telegram.core.webhook import SECRET_HEADER
from agentgram.bot.telegram.core.webhook_relay import RELAYED_HEADER
from tests.cluster.harness import WEBHOOK_PATH, WEBHOOK_SECRET, Cluster, Instance, cluster
from tests.conftest import ALLOWED_USER, use_library
from tests.fakes.openai_server import Hang, Reply, Text, ToolCalls

USERS = [ALLOWED_USER + n for n in range(12)]


@pytest.fixture(autouse=True)
def _aiogram() -> Iterator[None]:
    """These instances run the aiogram driver (the suite's other modules run python-telegram-bot:
    both drivers are covered without running every process-level scenario twice)."""
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
    """POST ``update`` to the instance's own listener, as Telegram (or a standby) would; the status."""
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
    a, b, c = rig.instances
    await a.start_leading()
    await b.start_standby()
    await c.start_standby()
    return a, b, c


async def test_twelve_chats_through_the_proxy_are_answered_once_and_in_order(tmp_path: Path) -> None:
    async with cluster(tmp_path, 3, proxy=True, telegram={"allowed_user_ids": USERS}) as rig:
        assert rig.proxy is not None
        rig.llm.handler = lambda body: Text(f"Got {_last_user(body)}.")
        a, b, c = await _three(rig)
        health = [await _health(i) for i in (a, b, c)]
        assert [h["role"] for h in health] == ["leader", "standby", "standby"]
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
        for standby in (1, 2):
            assert 200 in rig.proxy.statuses(standby), "standbys took updates and relayed them"
        assert rig.tg.calls("getUpdates") == []
        assert "agentgram is running" not in b.log_text() + c.log_text(), "no standby runs a session"
        for instance in (c, b, a):
            assert await instance.terminate() == 0


async def test_presses_landing_on_standbys_apply_once_and_a_conflicting_one_is_refused(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, 3, proxy=True) as rig:
        assert rig.proxy is not None
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
        a, b, c = await _three(rig)
        a.say("run it")
        prompt = await a.wait_containing("Approval needed")
        await a.wait(
            lambda: bool(a.query("SELECT 1 FROM approval_requests WHERE message_id = ?", prompt.message_id)),
            "the prompt bound to its request",
        )
        approve, reject = prompt.button_data("Approve"), prompt.button_data("Reject")
        rig.proxy.route(1, 2)  # the approval lands on standby b, a conflicting reject on standby c
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
        assert (b.workdir / "marker.txt").read_text().splitlines() == ["ran"], "the command ran once"
        assert [r["status"] for r in a.query("SELECT status FROM approval_requests")] == ["approved"]
        assert a.count("Ran it.") == 1
        # a relayed POST that reaches a standby is refused, never relayed on (no loops)
        assert await _post(c, again, relayed_by="node-b") == 503
        # a standby checks the secret and the body itself: 403 and nothing stored; 200 and a dead letter
        letters = len(a.query("SELECT id FROM dead_letters"))
        assert await _post(c, again, secret=None) == 403 and await _post(c, again, secret="wrong" * 8) == 403
        assert await _post(c, b"{not json") == 200
        assert len(a.query("SELECT id FROM dead_letters")) == letters + 1
        for instance in (c, b, a):
            assert await instance.terminate() == 0
        a.assert_consistent("run it")


async def test_the_leaders_death_behind_the_proxy_costs_no_message(tmp_path: Path) -> None:
    """The leader is killed mid-turn; the proxy skips it, the standbys answer 503 while nobody
    leads (Telegram retries), and once one takes over every message is answered once."""
    async with cluster(tmp_path, 3, proxy=True) as rig:
        asked: list[str] = []

        def answer(body: dict[str, Any]) -> Reply:
            asked.append(_texts(body))
            return Hang("Let me think", seconds=60) if len(asked) == 1 else Text(f"Answer {len(asked)}.")

        rig.llm.handler = answer
        a, b, c = await _three(rig)
        a.say("what is 2+2?")
        await a.wait(lambda: a.drafted("Let me think"), "the leader's draft")
        await a.kill()
        for n in range(3):
            a.say(f"and {n}+{n}?")
        took = await _new_leader(b, c)
        await took.wait(lambda: not rig.tg.unconfirmed(), "every update confirmed", 60)
        await took.wait(lambda: any("and 2+2?" in text for text in asked), "the last message asked")
        await took.wait_settled()  # the resumed turn may have read the later messages, or not
        await took.wait(lambda: took.count(f"Answer {len(asked)}.") == 1, "the last answer shown")
        for n in range(2, len(asked) + 1):
            assert took.count(f"Answer {n}.") == 1, f"answer {n} shown once"
        assert any(d.status == 503 for d in rig.tg.webhook_deliveries), "refused while nobody led"
        for instance in (b, c):
            assert await instance.terminate() == 0
        took.assert_consistent("what is 2+2?", *(f"and {n}+{n}?" for n in range(3)))


def _texts(body: dict[str, Any]) -> str:
    return " | ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "user")


async def _new_leader(*standbys: Instance) -> Instance:
    async def lead(instance: Instance) -> Instance:
        await instance.wait_lead()
        return instance

    tasks = [asyncio.create_task(lead(instance)) for instance in standbys]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return done.pop().result()
