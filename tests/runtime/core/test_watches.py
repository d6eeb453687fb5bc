"""Watches (issue 29, :mod:`runtime.core.watches`) in a whole runtime: the real bus, mailbox, turns
and SQLite file, the real ``openai`` SDK against the fake server, a fake clock for expiry.

A chat session (the parent) watches helper sessions it spawned (rows made as ``spawn_session``
makes them, with no task yet, so each test says when a helper starts: by mail from its parent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from agentgram.runtime.app import Runtime
from agentgram.runtime.core.mailbox import AgentMessageBody, Envelope
from agentgram.runtime.core.peers import Refused
from agentgram.runtime.core.watches import WatchEvent
from agentgram.runtime.infra.events import ToolActivity, ToolPhase, TurnFinished
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource, SessionWatch, utcnow
from agentgram.runtime.scheduler.clock import FakeClock
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder

HELPER = """\
---
description: helps
model: backup
---
You are the helper.
"""
MODELS = {"models": [{"name": "backup", "model": "backup-model"}]}
CHAT = ALLOWED_USER
COMPLETED = [WatchEvent.TOOL_COMPLETED]


@asynccontextmanager
async def running(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock, url: str | None = None
) -> AsyncIterator[tuple[Runtime, Recorder]]:
    """A started runtime on a SQLite file in ``tmp_path`` (or the database ``url``)."""
    folder = tmp_path / "workspace" / "agents" / "helper"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "AGENT.md").write_text(HELPER)
    sections: dict[str, Any] = {"llm": MODELS}
    if url is not None:
        sections["storage"] = {"url": url}
    runtime = Runtime(make_settings(tmp_path, fake_llm.base_url, **sections), clock=clock)
    recorder = Recorder()
    runtime.parts.bus.subscribe(recorder)
    await runtime.start()
    try:
        yield runtime, recorder
    finally:
        await runtime.close()


async def family(runtime: Runtime, children: int = 1) -> tuple[int, list[int]]:
    """The chat's session and ``children`` idle helper sessions under it."""
    parent = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
    kids = []
    for _ in range(children):
        child = await runtime.parts.session_store.create(
            ChatSession(
                source=SessionSource.AGENT,
                chat_id=CHAT,
                user_id=CHAT,
                agent_id="helper",
                is_interactive=False,
                active=False,
                parent_session_id=parent.id,
                root_session_id=parent.id,
            )
        )
        assert child.id is not None
        kids.append(child.id)
    return parent.id, kids


async def helper_lists_the_folder(
    runtime: Runtime, recorder: Recorder, fake_llm: FakeOpenAI, parent: int, child: int
) -> None:
    """The parent gives ``child`` a task; the helper lists the folder and answers; everything its
    events queued is posted."""
    fake_llm.on_model("backup-model", ToolCalls([Call("list_dir", {})]), Text("Listed."))
    await runtime.parts.peers.send(parent, str(child), "list the folder")
    await recorder.wait_for(lambda: finished(recorder, child))
    await runtime.parts.watches.idle()


def finished(recorder: Recorder, session_id: int) -> bool:
    return any(isinstance(e, TurnFinished) and e.to.session_id == session_id for e in recorder.events)


async def watch_mail(runtime: Runtime, session_id: int) -> list[Envelope]:
    """Every watch mail the session got, read or not."""
    return [e for e in await runtime.parts.mailbox.unread(session_id, after=0) if e.id.startswith("watch:")]


def text(envelope: Envelope) -> str:
    assert isinstance(envelope.body, AgentMessageBody)
    return envelope.body.text


async def test_a_watch_wakes_the_parent_with_its_childs_completed_tool_once(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("hello")
    async with running(tmp_path, fake_llm, FakeClock(utcnow())) as (runtime, recorder):
        parent, (child,) = await family(runtime)
        watch = await runtime.parts.watches.watch(parent, str(child), COMPLETED, "list_*", 600)
        fake_llm.script(Text("The helper listed the folder."))  # the parent, woken by the watch
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, child)
        await recorder.wait_for(lambda: finished(recorder, parent))

        woken = next(r for r in fake_llm.requests if r["model"] == "main-model")
        said = [str(m["content"]) for m in woken["messages"] if m["role"] == "user"]
        line = f"[watch] session {child}: tool list_dir completed (status completed): "
        assert any(line in s and "notes.txt" in s for s in said), said
        (mail,) = await watch_mail(runtime, parent)
        assert mail.id == f"watch:{watch.id}:call:{_done_call(recorder, child)}:end"
        assert mail.hops == 2, "the helper's hops (its task's, 1) plus one"
        assert mail.sender.ref == str(child)
        assert isinstance(mail.body, AgentMessageBody) and mail.body.relation == "child"

        replayed = next(
            e for e in recorder.events if isinstance(e, ToolActivity) and e.phase is ToolPhase.DONE
        )
        runtime.parts.bus.emit(replayed)
        await runtime.parts.watches.idle()
        assert len(await watch_mail(runtime, parent)) == 1, "a replayed event is a duplicate, not more mail"
        fake_llm.assert_complete()


def _done_call(recorder: Recorder, session_id: int) -> int:
    return next(
        e.tool_call_id
        for e in recorder.events
        if isinstance(e, ToolActivity) and e.to.session_id == session_id and e.phase is ToolPhase.DONE
    )


async def test_a_peer_watching_hears_only_the_events_and_tools_it_named_and_is_not_woken(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("hello")
    async with running(tmp_path, fake_llm, FakeClock(utcnow())) as (runtime, recorder):
        parent, (watcher, watched) = await family(runtime, 2)
        every = list(WatchEvent)
        await runtime.parts.watches.watch(watcher, str(watched), every, "list_*", 600)
        await runtime.parts.watches.watch(parent, str(watched), [WatchEvent.TOOL_STARTED], "read_*", 600)
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, watched)

        lines = [text(e) for e in await watch_mail(runtime, watcher)]
        assert len(lines) == 3, lines
        assert lines[0] == f"[watch] session {watched}: tool list_dir started"
        assert lines[1].startswith(f"[watch] session {watched}: tool list_dir completed (status completed): ")
        assert "notes.txt" in lines[1]
        assert lines[2] == f"[watch] session {watched}: turn finished (final): Listed."
        assert await runtime.parts.mailbox.cursor(watcher) == 0, "a peer's mail waits: wake_on has no peer"
        assert not finished(recorder, watcher)
        assert await watch_mail(runtime, parent) == [], "read_* matched no call"


async def test_the_ninth_watch_is_refused_and_watching_again_replaces(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    async with running(tmp_path, fake_llm, FakeClock(utcnow()), database_url) as (runtime, _):
        watches = runtime.parts.watches
        parent, kids = await family(runtime, 9)
        for kid in kids[:8]:
            await watches.watch(parent, str(kid), COMPLETED, None, 600)
        with pytest.raises(Refused, match=r"too many watches: this session holds 8 \(agent.max_watches\)"):
            await watches.watch(parent, str(kids[8]), COMPLETED, None, 600)
        again = await watches.watch(parent, str(kids[0]), [WatchEvent.TURN_FINISHED], None, 60)
        assert [w.events for w in watches.watching(kids[0])] == [frozenset({WatchEvent.TURN_FINISHED})]
        assert again.id not in {w.id for kid in kids[1:8] for w in watches.watching(kid)}
        await watches.unwatch(parent, str(kids[0]))
        await watches.watch(parent, str(kids[8]), COMPLETED, None, 600)  # room again


async def test_an_expired_watch_sends_nothing_and_is_deleted(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    clock = FakeClock(utcnow())
    async with running(tmp_path, fake_llm, clock) as (runtime, recorder):
        parent, (child,) = await family(runtime)
        await runtime.parts.watches.watch(parent, str(child), COMPLETED, None, 60)
        clock.advance(timedelta(seconds=61))
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, child)
        assert await watch_mail(runtime, parent) == []
        assert runtime.parts.watches.watching(child) == []
        assert await _stored(runtime) == 0


async def test_unwatch_stops_the_mail(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with running(tmp_path, fake_llm, FakeClock(utcnow())) as (runtime, recorder):
        parent, (child,) = await family(runtime)
        watches = runtime.parts.watches
        watch = await watches.watch(parent, str(child), COMPLETED, None, 600)
        assert await watches.unwatch(parent, str(child)) == watch.id
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, child)
        assert await watch_mail(runtime, parent) == []
        with pytest.raises(Refused, match=f"does not watch session {child}"):
            await watches.unwatch(parent, str(child))


async def test_a_watch_survives_a_restart(tmp_path: Path, fake_llm: FakeOpenAI, database_url: str) -> None:
    """On each backend: the first runtime stops, the second starts on the same database."""
    async with running(tmp_path, fake_llm, FakeClock(utcnow()), database_url) as (runtime, _):
        parent, (child,) = await family(runtime)
        watch = await runtime.parts.watches.watch(parent, str(child), COMPLETED, None, 600)
    async with running(tmp_path, fake_llm, FakeClock(utcnow()), database_url) as (runtime, recorder):
        assert [w.id for w in runtime.parts.watches.watching(child)] == [watch.id]
        fake_llm.script(Text("Seen."))
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, child)
        (mail,) = await watch_mail(runtime, parent)
        assert text(mail).startswith(f"[watch] session {child}: tool list_dir completed")
        await recorder.wait_for(lambda: finished(recorder, parent))


async def test_a_watch_ends_with_its_watchers_chat_session(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with running(tmp_path, fake_llm, FakeClock(utcnow())) as (runtime, recorder):
        parent, (child,) = await family(runtime)
        await runtime.parts.watches.watch(parent, str(child), COMPLETED, None, 600)
        await runtime.chat.new_session(CHAT, user_id=CHAT, language="en", envelope_id="new-1")  # /new
        await helper_lists_the_folder(runtime, recorder, fake_llm, parent, child)
        assert await watch_mail(runtime, parent) == []
        assert runtime.parts.watches.watching(child) == []
        assert await _stored(runtime) == 0


async def test_only_sessions_within_the_mail_scope_can_be_watched(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with running(tmp_path, fake_llm, FakeClock(utcnow())) as (runtime, _):
        watches = runtime.parts.watches
        parent, _kids = await family(runtime)
        other = await runtime.chat.chat_session(CHAT + 1, user_id=CHAT + 1, language="en")
        with pytest.raises(Refused, match=f"not permitted: .* session {other.id} is not one"):
            await watches.watch(parent, str(other.id), COMPLETED, None, 600)
        with pytest.raises(Refused, match="cannot watch itself"):
            await watches.watch(parent, str(parent), COMPLETED, None, 600)
        with pytest.raises(Refused, match="there is no session 999"):
            await watches.watch(parent, "999", COMPLETED, None, 600)
        assert await _stored(runtime) == 0


async def _stored(runtime: Runtime) -> int:
    """The watch rows in the database, live or not."""
    rows = await runtime.parts.db.read_sync(lambda tx: list(tx.exec(select(SessionWatch)).all()))
    return len(rows)
