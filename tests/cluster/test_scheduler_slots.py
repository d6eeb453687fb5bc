"""The scheduler runs once per slot across a killed leader (issue 27 items 9 and 13: "a tic that fires
once per slot with an instance killed"), on a real PostgreSQL with two real processes.

The tic fires every second (:data:`INTERVAL`). The leader's second tic hangs in its model call; the
next slot comes while it runs (recorded skipped); then the leader is killed (``SIGKILL``). The
standby takes over: it settles the hung tic as failed (not run again), applies the misfire rule to
the slots that passed while nobody led (the newest runs now, the older ones are folded into it) and
fires its own slots. Every slot is then one ``tic_runs`` row or folded into the catch-up's, and no
slot reached the model twice.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import TAKEOVER, cluster
from tests.crash.harness import Row
from tests.fakes.openai_server import Hang, Reply, Text

INTERVAL = 1.0
"""Shorter than the takeover can be (``lease_ttl`` less a heartbeat): some slots pass unled."""
TIC = {"enabled": True, "interval": INTERVAL, "prompt": "Anything due?"}
HANGS = 2
"""The leader's tic whose model call hangs until the leader is killed."""
CATCH_UP = re.compile(r"tic catch-up: slot (\S+) runs now")
INTERRUPTED = "interrupted by restart"
STILL_RUNNING = "the previous tic is still running"


def tic_rows(rows: list[Row]) -> list[dict[str, Any]]:
    return [
        {
            "slot": r["slot"],
            "status": r["status"],
            "reason": r["reason"],
            "session": r["session_id"],
            "ended": r["ended_at"],
        }
        for r in rows
    ]


@pytest.mark.parametrize("webhook", [False, True], ids=["polling", "webhook"])
async def test_a_tic_fires_once_per_slot_across_a_killed_leader(tmp_path: Path, webhook: bool) -> None:
    """Polling, the other instance waits as a standby; in webhook mode it runs its chats from the
    start and takes the lead, which is then only the scheduler's, in the background."""
    async with cluster(tmp_path, webhook=webhook, tic=TIC) as rig:
        a, b = rig.instances
        asked: list[str] = []

        def answer(body: dict[str, Any]) -> Reply:
            asked.append(next(str(m["content"]) for m in reversed(body["messages"]) if m["role"] == "user"))
            return Hang(seconds=60) if len(asked) == HANGS else Text("TIC_OK")

        def rows() -> list[dict[str, Any]]:
            return tic_rows(a.query("SELECT * FROM tic_runs ORDER BY slot"))

        rig.llm.handler = answer
        if webhook:
            await a.start_leading()
            await b.start_member()
        else:
            await a.start()
            await b.start_standby()
        await a.wait(lambda: len(asked) == HANGS, "the leader's tic that hangs", timeout=20)
        await a.wait(
            lambda: any(r["reason"] == STILL_RUNNING for r in rows()), "a slot that came while it hung"
        )
        killed_at = datetime.now(UTC)
        await a.kill()
        if webhook:  # the lead is only the scheduler's: no webhook is set again
            await b.wait(b.leads, "b to lead", TAKEOVER)
        else:
            await b.wait_lead()
        await b.wait(
            lambda: len([r for r in rows() if r["slot"] > killed_at and r["ended"] is not None]) >= 3,
            "the new leader's catch-up and two slots of its own",
        )
        assert await b.terminate() == 0

        done = rows()
        slots = [r["slot"] for r in done]
        assert all(s is not None and s.timestamp() % INTERVAL == 0 for s in slots), (
            "every fire names its slot"
        )
        assert len(set(slots)) == len(slots), "one row per slot"
        [hung] = [r for r in done if r["status"] == "failed"]
        assert hung["reason"] == INTERRUPTED and hung["slot"] < killed_at, "the hung tic was not run again"
        assert {(r["status"], r["reason"]) for r in done} <= {
            ("ran", None),
            ("failed", INTERRUPTED),
            ("skipped", STILL_RUNNING),
        }

        # no slot reached the model twice: every request belongs to a row that ran (one each), and
        # every row that ran to its end had its request answered
        assert all(text.startswith("[TIC] ") for text in asked)
        started = [r for r in done if r["session"] is not None]
        finished = [r for r in started if r["status"] == "ran" and r["ended"] is not None]
        assert len(finished) <= len(asked) <= len(started), (len(finished), len(asked), len(started))

        # every slot is a row, or folded by the misfire rule into the new leader's catch-up row
        caught = [datetime.fromisoformat(m) for m in CATCH_UP.findall(b.log_text())]
        assert len(caught) == 1, f"one catch-up on the takeover: {caught}"
        [catch_up] = caught
        assert catch_up in slots and catch_up > killed_at
        step = timedelta(seconds=INTERVAL)
        every = [slots[0] + step * n for n in range(int((slots[-1] - slots[0]) / step) + 1)]
        folded = sorted(set(every) - set(slots))
        assert folded, "the takeover outlasts a slot"
        for missing in folded:
            assert min(s for s in slots if s > missing) == catch_up, f"slot {missing} has no row"
        assert a.chat() == [], "a tic that answers TIC_OK says nothing"
