"""The prefetch and the first round build their request with one builder, so they cannot disagree
(issue 24: the prefetch decided "headless" by the source, the round by ``is_ephemeral``, and a
disagreement threw the prefetch away silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.core.mailbox import Envelope, Sender, SenderKind, UserMessageBody
from agentgram.runtime.core.turn import steps
from agentgram.runtime.core.turn.deps import TurnDeps
from agentgram.runtime.core.turn.frame import NO_ECHO, Frame
from agentgram.runtime.core.turn.graph import STEPS, BuildRequest, CallModel, CallTools, PersistRound, Receive
from agentgram.runtime.core.turn.request import build_request, main_level
from agentgram.runtime.infra.events import EventBus
from agentgram.runtime.infra.llm.scripted import Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import LLMRound
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource, utcnow
from tests.runtime.core.turn.scripted import CHAT, Ask, Hold, build_services, hub_rig


async def _said(deps: TurnDeps, session: ChatSession, text: str) -> list[Envelope]:
    sid = session.id or 0
    envelope = Envelope(
        id=f"m-{text}", session_id=sid, sender=Sender(kind=SenderKind.USER), body=UserMessageBody(text=text)
    )
    await deps.mailbox.accept(envelope)
    return await deps.mailbox.unread(sid)


@pytest.mark.parametrize("source", [SessionSource.CHAT, SessionSource.TIC, SessionSource.CRON])
async def test_the_prefetch_and_the_first_round_build_the_same_request(
    tmp_path: Path, source: SessionSource
) -> None:
    deps = await build_services(tmp_path, ScriptedLLM.script(), [Hold(), Ask()], EventBus())  # no hub
    try:
        if source is SessionSource.CHAT:
            session, _ = await deps.sessions.find_or_open(CHAT, user_id=CHAT, language="en")
        else:
            session = await deps.sessions.create_headless(source, CHAT)
        sid = session.id or 0
        earlier = await steps.open_turn(deps, sid, await _said(deps, session, "earlier"))
        await deps.history.record_round(
            session_id=sid, turn_id=earlier, result=LLMRound(text="Sure."), closes_turn=True
        )
        frame, now = Frame.root(main_level(deps, session), NO_ECHO), utcnow()
        mail = await _said(deps, session, "what now?")
        ahead = await build_request(deps, session, frame, now=now, mail=mail)  # as the prefetch builds it
        await steps.open_turn(deps, sid, mail)
        stored = await build_request(deps, session, frame, now=now)  # as the first round builds it
        assert ahead.messages == stored.messages
        assert [m.content for m in stored.messages[1:4]] == ["earlier", "Sure.", "what now?"]
        assert ahead.tools.specs() == stored.tools.specs()
        assert {spec.name for spec in stored.tools.specs()} == {"hold", "ask"}  # neither asks the user
    finally:
        await deps.db.close()


def test_the_steps_of_a_round_are_listed_in_one_place() -> None:
    assert [Receive, BuildRequest, CallModel, PersistRound, CallTools] == [
        step for step in STEPS if step in (Receive, BuildRequest, CallModel, PersistRound, CallTools)
    ]


async def test_a_chat_turn_adopts_its_prefetched_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round("Hello!"))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "hi")
        [finished] = await rig.turns_finished()
        assert finished.text == "Hello!"
        assert len(llm.requests) == 1, "the prefetched request was adopted, not asked again"
