"""Named models: their config, the registry of clients, the session's choice and its usage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.infra.config import ConfigInvalid, LLMSettings, settings_from_mapping
from agentgram.runtime.infra.llm.models import ModelRegistry, Price, TokenUsage, session_cost
from agentgram.runtime.infra.llm.scripted import Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import LLMClient, LLMRound, Usage
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.usage_rows import SessionModels, UsageStore


def _llm(**fields: Any) -> LLMSettings:
    return settings_from_mapping({"llm": {"model": "main", **fields}}, {}).llm


SMART = {"name": "smart", "model": "gpt-big", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-smart"}


class Made:
    """A client factory that records the settings each named model's client was made from."""

    def __init__(self) -> None:
        self.settings: list[LLMSettings] = []
        self.closed = 0

    def __call__(self, settings: LLMSettings) -> LLMClient:
        self.settings.append(settings)
        client = ScriptedLLM(lambda m, t: Round("x"), model=settings.model)
        made = self

        async def aclose() -> None:
            made.closed += 1

        client.aclose = aclose  # type: ignore[attr-defined]
        return client


# --- config --------------------------------------------------------------------------------


def test_a_single_model_config_still_reads_and_is_the_default() -> None:
    registry = ModelRegistry(_llm(), ScriptedLLM.script())
    assert [(i.name, i.model) for i in registry.infos] == [("default", "main")]
    assert not registry.several


@pytest.mark.parametrize(
    ("models", "key"),
    [
        ([{"name": "default", "model": "x"}], "llm.models"),
        ([{"name": "a", "model": "x"}, {"name": "a", "model": "y"}], "llm.models"),
        ([{"name": "has space", "model": "x"}], "llm.models.0.name"),
        ([{"name": "a"}], "llm.models.0.model"),
        ([{"name": "a", "model": "x", "base_url": "ftp://x"}], "llm.models.0.base_url"),
        ([{"name": "a", "model": "x", "prices": {"input": -1, "output": 1}}], "llm.models.0.prices.input"),
        ([{"name": "a", "model": "x", "colour": "red"}], "llm.models.0.colour"),
    ],
)
def test_check_config_names_the_key_of_a_wrong_model(models: list[dict[str, Any]], key: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        _llm(models=models)
    assert any(problem.key == key for problem in caught.value.problems), caught.value


# --- the registry --------------------------------------------------------------------------


def test_a_named_model_gets_its_own_client_with_its_endpoint_or_the_sections() -> None:
    made = Made()
    plain = {"name": "cheap", "model": "gpt-small"}
    registry = ModelRegistry(
        _llm(models=[SMART, plain], fallback_models=["spare"]), ScriptedLLM.script(), factory=made
    )
    assert registry.client("smart") is registry.client("smart"), "one client per model, made once"
    registry.client("cheap")
    smart, cheap = made.settings
    assert (smart.model, smart.base_url, smart.api_key.get_secret_value()) == (
        "gpt-big",
        SMART["base_url"],
        "sk-smart",
    )
    assert (cheap.model, cheap.base_url) == ("gpt-small", "https://api.openai.com/v1"), (
        "the section's endpoint"
    )
    assert smart.fallback_models == [] and smart.models == []


def test_an_unknown_name_resolves_to_the_default() -> None:
    default = ScriptedLLM.script()
    registry = ModelRegistry(_llm(models=[SMART]), default, factory=Made())
    assert registry.client(None) is default and registry.client("gone") is default
    assert registry.info("gone").name == "default" and not registry.knows("gone")


async def test_aclose_closes_the_clients_it_made_not_the_default() -> None:
    made = Made()
    registry = ModelRegistry(_llm(models=[SMART]), ScriptedLLM.script(), factory=made)
    registry.client("smart")
    await registry.aclose()
    assert made.closed == 1


def test_cost_prices_each_wire_model_preferring_the_chosen_name() -> None:
    twin = {"name": "twin", "model": "main", "prices": {"input": 9, "output": 9}}
    registry = ModelRegistry(
        _llm(prices={"input": 1, "output": 2}, models=[twin, {**SMART, "prices": {"input": 3, "output": 6}}]),
        ScriptedLLM.script(),
    )
    usage = [TokenUsage("main", 2, 1_000_000, 500_000), TokenUsage("gpt-big", 1, 0, 1_000_000)]
    cost = session_cost(registry, usage, chosen=None)
    assert [line.cost for line in cost.lines] == [2.0, 6.0] and cost.cost == 8.0 and cost.fully_priced
    assert (cost.input_tokens, cost.output_tokens, cost.rounds) == (1_000_000, 1_500_000, 3)
    assert session_cost(registry, usage[:1], chosen="twin").cost == pytest.approx(13.5)
    unpriced = session_cost(registry, [*usage, TokenUsage("other", 1, 5, 5)], chosen=None)
    assert not unpriced.fully_priced and unpriced.cost == 8.0
    assert Price(1, 1).cost(0, 0) == 0


# --- the session's choice and usage ----------------------------------------------------------


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _session(db: Database, chat_id: int = 5) -> int:
    session, _ = await SessionStore(db).find_or_open(chat_id, user_id=chat_id, language="en")
    assert session.id is not None
    return session.id


async def test_a_choice_is_stored_and_read_back_by_a_later_process(db: Database) -> None:
    session_id = await _session(db)
    store = UsageStore(db)
    assert await store.chosen(session_id) is None
    await store.choose(session_id, "smart")
    assert await store.chosen(session_id) == "smart"
    assert await UsageStore(db).chosen(session_id) == "smart", "stored, not only cached"
    await store.choose(session_id, None)
    assert await UsageStore(db).chosen(session_id) is None


async def test_the_choice_cache_is_bounded(db: Database) -> None:
    store = UsageStore(db, kept=2)
    for session_id in (1, 2, 3):
        await store.chosen(session_id)
    assert list(store._cache) == [2, 3]


async def test_the_turn_gets_the_client_of_the_sessions_model(db: Database) -> None:
    session_id = await _session(db)
    default = ScriptedLLM.script()
    registry = ModelRegistry(_llm(models=[SMART]), default, factory=Made())
    models = SessionModels(registry, UsageStore(db))
    assert await models.client_for(session_id) is default
    await models.store.choose(session_id, "smart")
    assert await models.client_for(session_id) is registry.client("smart")


async def test_usage_sums_the_sessions_rounds_per_model(db: Database) -> None:
    session_id, other = await _session(db, 5), await _session(db, 6)
    history, sessions = HistoryStore(db), SessionStore(db)
    turn = await db.write_sync(lambda tx: sessions.open_turn(tx, session_id))
    rounds = [("main", 10, 5), ("main", 20, 7), ("gpt-big", 100, 50)]
    for model, prompt, completion in rounds:
        result = LLMRound(text="t", usage=Usage(prompt, completion), model=model)
        await history.record_round(session_id=session_id, turn_id=turn, result=result)
    await history.record_round(session_id=session_id, turn_id=turn, result=LLMRound(text="cut"))  # no model
    elsewhere = await db.write_sync(lambda tx: sessions.open_turn(tx, other))
    await history.record_round(
        session_id=other, turn_id=elsewhere, result=LLMRound(usage=Usage(1, 1), model="main")
    )
    assert await UsageStore(db).usage(session_id) == [
        TokenUsage("gpt-big", 1, 100, 50),
        TokenUsage("main", 2, 30, 12),
    ]
