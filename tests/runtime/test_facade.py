"""What crosses the runtime facade are its own frozen values, never ORM rows (issue 11)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agentgram.runtime.app import Checkpoint, PostResult, SessionRef
from agentgram.runtime.infra.config import settings_from_mapping
from tests.conftest import config_mapping, make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.core.turn.harness import started_runtime


async def test_sessions_cross_as_frozen_refs(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    runtime, _ = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        assert type(session) is SessionRef
        assert (session.chat_id, session.user_id, session.language_code) == (1001, 1001, "en")
        with pytest.raises(dataclasses.FrozenInstanceError):
            session.id = 0  # type: ignore[misc]
        fresh = await runtime.chat.new_session(1001, user_id=1001, language="en", envelope_id="n1")
        assert type(fresh) is SessionRef and fresh.id != session.id
        assert await runtime.chat.chat_session(1001, user_id=1001, language="en") == fresh
        assert await runtime.approvals.pending_approvals(fresh) == []
        overview = runtime.approvals.trust_overview(fresh)
        assert overview.bypasses == () and all(rule.origin == "user" for rule in overview.rules)
    finally:
        await runtime.close()


async def test_a_message_says_whether_its_checkpoint_was_stored(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("hi"))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        offset = Checkpoint("test.offset", "8")
        posted = await runtime.chat.accept_user_message(session, "hello", envelope_id="u1", checkpoint=offset)
        assert posted.result == PostResult.STARTED and posted.checkpoint_stored
        assert await runtime.values.get_value("test.offset") == "8"
        again = await runtime.chat.accept_user_message(session, "hello", envelope_id="u1", checkpoint=offset)
        assert again.result == PostResult.DUPLICATE and again.checkpoint_stored
        await rec.wait_kind("turn_finished")
    finally:
        await runtime.close()


async def test_the_runtime_runs_on_its_core_settings_alone(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """No ``telegram`` section: the runtime never needed one."""
    fake_llm.script(Text("hi"))
    raw = config_mapping(tmp_path, fake_llm.base_url)
    del raw["telegram"]
    del raw["advanced"]["telegram"]  # its tuning knobs too (the config's current layout)
    runtime, rec = await started_runtime(settings_from_mapping(raw, {}))
    try:
        session = await runtime.chat.chat_session(7, user_id=7, language=None)
        await runtime.chat.post_user_message(session, "hello", envelope_id="u1")
        await rec.wait_kind("turn_finished")
    finally:
        await runtime.close()
