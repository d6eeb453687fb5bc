"""Mail between sessions across a SIGKILL (issue 29): the chat's session and a helper it spawned
exchange four messages each way; the bot process is killed mid-exchange and started again.

Nothing is lost and nothing is delivered twice: every message is stored once (one ``session_mail``
row per envelope, one per text), each side's model reads each of the other's messages exactly once
(no request, before or after the restart, shows one twice; the last shows all, in order), and
every turn settles with no mail left unread (:meth:`CrashRig.assert_consistent`).

Kill points: ``child_reading`` — the helper's turn, woken by its parent's second message, has its
request out; ``parent_after_send`` — the parent's second message is sent and its call recorded,
its turn's next request is out; ``send_cut_short`` — as ``parent_after_send``, with the call put
back to ``running`` while the bot is down: the state a kill between the mail's accept and the
call's record leaves. The resumed turn runs that call again, and the mailbox takes the same
envelope (its id is the call's) once; ``spawn_cut_short`` — the same for the ``spawn_session``
call: run again, it finds the helper its first run made instead of making a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import CrashRig, crash_rig
from tests.e2e.test_peers_mail import exchange, said, sent
from tests.fakes.openai_server import Hang, Reply

pytestmark = ONE_DRIVER  # mail between sessions is the runtime's alone; the e2e suite runs both drivers

TO_CHILD = [f"to-child-{n}" for n in range(1, 5)]
TO_PARENT = [f"to-parent-{n}" for n in range(1, 5)]
LLM = {"models": [{"name": "helper", "model": "helper-model"}]}
HELPER = "---\ndescription: answers its parent\nmodel: helper\n---\nYou are the helper.\n"
PARENT, CHILD = exchange(TO_CHILD, TO_PARENT)


def kills_here(kill_point: str, body: dict[str, Any]) -> bool:
    if body["model"] == "helper-model":
        return kill_point == "child_reading" and TO_CHILD[1] in said(body)
    if kill_point == "spawn_cut_short":
        return sent(body) == 1 and TO_PARENT[0] not in said(body)
    return kill_point != "child_reading" and sent(body) == 2 and TO_PARENT[1] not in said(body)


CUT_SHORT = {"send_cut_short": "send_message", "spawn_cut_short": "spawn_session"}
"""The kill points that put the parent's last call of a tool back to ``running``."""


def mail_rows(rig: CrashRig) -> list[dict[str, Any]]:
    """The mail sessions sent each other, in the order it was stored."""
    rows = rig.query(
        "SELECT envelope_id, session_id, hops, body FROM session_mail WHERE kind = 'agent_message' ORDER BY id"
    )
    return [
        {
            "envelope_id": row["envelope_id"],
            "session_id": row["session_id"],
            "hops": row["hops"],
            "text": _json(row["body"])["text"],
        }
        for row in rows
    ]


def _json(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else dict(json.loads(value))


def assert_read_once(rig: CrashRig, model: str, texts: list[str]) -> None:
    """No request of ``model`` shows one of ``texts`` twice; its last shows each once, in order."""
    bodies = [b for b in rig.llm.requests if b["model"] == model]
    for body in bodies:
        counts = {t: said(body).count(t) for t in texts}
        assert max(counts.values()) <= 1, f"a message read twice: {counts}"
    last = said(bodies[-1])
    places = [last.index(t) for t in texts]
    assert places == sorted(places), f"read out of order: {places}"


@pytest.mark.parametrize(
    "kill_point", ["child_reading", "parent_after_send", "send_cut_short", "spawn_cut_short"]
)
async def test_killed_mid_exchange_no_mail_is_lost_or_delivered_twice(
    tmp_path: Path, kill_point: str
) -> None:
    async with crash_rig(tmp_path, llm=LLM) as rig:
        folder = rig.workdir / "agents" / "helper"
        folder.mkdir(parents=True)
        (folder / "AGENT.md").write_text(HELPER)

        def answer(body: dict[str, Any]) -> Reply:
            if rig.starts == 1 and kills_here(kill_point, body):
                if rig.kills == 0:
                    rig.kill_now()
                return Hang(seconds=30)
            return CHILD(body) if body["model"] == "helper-model" else PARENT(body)

        rig.llm.handler = answer
        await rig.start()
        rig.say("talk to a helper four times")
        await rig.wait(lambda: rig.kills == 1, "the kill mid-exchange")
        await rig.reap_killed()
        if kill_point in CUT_SHORT:
            [call] = rig.query(
                "SELECT id FROM tool_calls WHERE session_id = 1 AND name = ? ORDER BY id DESC LIMIT 1",
                CUT_SHORT[kill_point],
            )
            rig.write_db(
                "UPDATE tool_calls SET status = 'running', result = NULL, finished_at = NULL WHERE id = ?",
                call["id"],
            )
        mail_before = mail_rows(rig)

        await rig.start()
        await rig.wait_containing("All 4 answered.")
        await rig.wait_settled()
        assert await rig.terminate() == 0

        rig.assert_consistent("talk to a helper four times")
        mail = mail_rows(rig)
        assert [m["envelope_id"] for m in mail[: len(mail_before)]] == [m["envelope_id"] for m in mail_before]
        assert len({m["envelope_id"] for m in mail}) == len(mail)
        to_child = [m["text"] for m in mail if m["session_id"] == 2]
        to_parent = [m["text"] for m in mail if m["session_id"] == 1]
        assert len(to_child) == len(TO_CHILD), f"delivered twice or lost: {to_child}"
        assert [t.endswith(expected) for t, expected in zip(to_child, TO_CHILD, strict=True)] == [True] * 4
        assert to_parent == TO_PARENT
        assert [m["hops"] for m in mail if m["session_id"] == 2] == [1, 3, 5, 7]
        assert_read_once(rig, "main-model", TO_PARENT)
        assert_read_once(rig, "helper-model", TO_CHILD)
        assert rig.count_containing("All 4 answered.") == 1
        assert [row["id"] for row in rig.query("SELECT id FROM sessions ORDER BY id")] == [1, 2]
