"""One send path per chat: a handler's acknowledgement and the turn's answer share the chat's queue.

Regression: a handler's "📝 Noted — I'll read this at my next step." got a 429 (retry after
1 s); 0.33 s later the chat's outbox sent the turn's answer anyway, and the acknowledgement
arrived after it. Now a 429 on any call in a chat pauses that chat's whole queue, and the
acknowledgement keeps its place before the answer. Runs once per driver (conftest).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.e2e.test_turn_control import ALLOW_SHELL, start_waiting_command
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import RecordedRequest

NOTED = "Noted — I'll read this at my next step"


def in_chat(request: RecordedRequest) -> bool:
    return str(request.params.get("chat_id")) == str(ALLOWED_USER)


def noted(params: dict[str, object]) -> bool:
    return NOTED in str(params.get("text"))


async def test_a_429_on_the_acknowledgement_pauses_the_chat_and_keeps_it_before_the_answer(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ALLOW_SHELL) as rig:
        await start_waiting_command(rig, "run the thing", Text("Both done."))
        rig.tg.fail_next("sendMessage", status=429, retry_after=1, when=noted)
        rig.say("ALSO check /var/log")  # the turn is busy: acknowledged, read at its next step
        await rig.tg.wait_for(lambda: any(c.status == 429 for c in rig.tg.calls("sendMessage")))
        (rig.workdir / "go").touch()  # the answer is ready while the chat is paused
        await rig.wait_turns(timeout=15)

        [refused] = [c for c in rig.tg.calls("sendMessage") if c.status == 429]
        assert noted(refused.params)
        during_pause = [
            c for c in rig.tg.requests if in_chat(c) and refused.time < c.time < refused.time + 1.0
        ]
        assert during_pause == [], [(c.method, round(c.time - refused.time, 3)) for c in during_pause]
        texts = rig.texts()
        acks = [t for t in texts if NOTED in t]
        assert len(acks) == 1 and texts.count("Both done.") == 1, texts
        assert texts.index(acks[0]) < texts.index("Both done.")
        sends = [c for c in rig.tg.calls("sendMessage") if c.status == 200 and in_chat(c)]
        assert len(sends) == len({str(c.params.get("text")) for c in sends}), "each message delivered once"
        answer = next(c for c in sends if "Both done." in str(c.params.get("text")))
        assert answer.time >= refused.time + 1.0, "the answer waited out the acknowledgement's 429"
