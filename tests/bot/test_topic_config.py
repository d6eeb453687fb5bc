"""``telegram.groups.topics``: a forum topic's own agent and prompt. A mistake is one config line
naming the key it is under and exit 2, for ``check-config`` and ``run`` alike; a topic is looked
up by its thread (none, or 0, is the General topic); the agents it names are checked against the
catalog by :func:`~bot.settings.unknown_topic_agents`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgram.bot.settings import (
    GroupSettings,
    TopicSettings,
    bot_settings_from_mapping,
    unknown_topic_agents,
)
from tests.bot.test_cli import _config, _main, connections
from tests.conftest import config_mapping

__all__ = ["connections"]  # the fixture, used by name

GROUP = -1001234567890
OTHER = -1009876543210


def _groups(topics: dict[Any, Any]) -> dict[str, Any]:
    return {"groups": {"allowed_chat_ids": [GROUP], "topics": topics}}


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize(
    ("topics", "line"),
    [
        (
            {OTHER: {42: {"agent": "researcher"}}},
            f"telegram.groups.topics.{OTHER}: {OTHER} is not in telegram.groups.allowed_chat_ids",
        ),
        (
            {GROUP: {0: {"prompt": "Be brief."}}},
            f"telegram.groups.topics.{GROUP}.0: a topic id is 1 or more (1: the General topic)",
        ),
        ({GROUP: {42: {}}}, f"telegram.groups.topics.{GROUP}.42: set agent, prompt or both"),
        ({GROUP: {42: {"agent": None, "prompt": None}}}, f"telegram.groups.topics.{GROUP}.42: set agent"),
        (
            {GROUP: {42: {"agent": "Research Team"}}},
            f"telegram.groups.topics.{GROUP}.42.agent: 'Research Team' is not an agent's name",
        ),
        ({GROUP: {42: {"agent": "../main"}}}, f"telegram.groups.topics.{GROUP}.42.agent: '../main' is not"),
        ({GROUP: {42: {"prompt": "  "}}}, f"telegram.groups.topics.{GROUP}.42.prompt: is empty"),
        (
            {GROUP: {42: {"promt": "Be brief."}}},
            f"telegram.groups.topics.{GROUP}.42.promt: is not a known key",
        ),
        ({str(GROUP): {"42": {"agent": "main", "model": "y"}}}, f"telegram.groups.topics.{GROUP}.42.model:"),
    ],
)
def test_a_topic_mistake_is_one_line_naming_its_key_and_exit_2(
    topics: dict[Any, Any],
    line: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    connections: list[object],
) -> None:
    config = _config(tmp_path, telegram=_groups(topics))
    code, err, out = _main(capsys, command, "--config", str(config))
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(f"config error: {line}"), err
    assert connections == []


def test_topics_keyed_by_quoted_ids_pass_and_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    """YAML keys may be strings ("-100…"): pydantic reads them as the numbers they are."""
    topics = {str(GROUP): {"42": {"agent": "researcher"}, "1": {"prompt": "Quick questions only."}}}
    _agent(tmp_path, "researcher")
    code, err, out = _main(
        capsys, "check-config", "--config", str(_config(tmp_path, telegram=_groups(topics)))
    )
    assert (code, err) == (0, [])
    shown = json.loads(out)["telegram"]["groups"]["topics"]
    assert shown == {
        str(GROUP): {
            "42": {"agent": "researcher", "prompt": None},
            "1": {"agent": None, "prompt": "Quick questions only."},
        }
    }
    assert connections == []


def _agent(tmp_path: Path, name: str) -> None:
    """An agent definition where the config of these tests keeps its agents (``ws/agents``)."""
    folder = tmp_path / "ws" / "agents" / name
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(f"You are the {name}.\n")


@pytest.mark.parametrize("command", ["check-config", "run"])
def test_a_topic_agent_that_is_not_defined_is_one_line_and_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    _agent(tmp_path, "researcher")
    topics = {GROUP: {42: {"agent": "researcher"}, 43: {"agent": "writer"}}}
    code, err, out = _main(capsys, command, "--config", str(_config(tmp_path, telegram=_groups(topics))))
    assert (code, out) == (2, "")
    assert err == [
        f"config error: telegram.groups.topics.{GROUP}.43.agent: no agent named 'writer' (agents: main, researcher)"
    ], err
    assert connections == []


def test_a_topic_is_looked_up_by_its_thread_and_no_thread_is_the_general_topic() -> None:
    groups = GroupSettings.model_validate(
        {
            "allowed_chat_ids": [GROUP, OTHER],
            "topics": {str(GROUP): {"42": {"agent": "researcher"}, "1": {"prompt": " Quick questions. "}}},
        }
    )
    assert groups.topic(GROUP, 42) == TopicSettings(agent="researcher")
    general = TopicSettings(prompt="Quick questions.")  # kept without the spaces around it
    assert groups.topic(GROUP, 1) == groups.topic(GROUP, None) == groups.topic(GROUP, 0) == general
    assert groups.topic(GROUP, 7) is None, "a topic not named has nothing of its own"
    assert groups.topic(OTHER, 42) is None and groups.topic(OTHER, None) is None


def test_the_agents_topics_name_are_checked_against_the_catalog(tmp_path: Path) -> None:
    topics = {GROUP: {1: {"prompt": "Be brief."}, 42: {"agent": "researcher"}, 43: {"agent": "writer"}}}
    settings = bot_settings_from_mapping(
        config_mapping(tmp_path, "http://127.0.0.1:9/v1", telegram=_groups(topics)), {}
    )
    assert unknown_topic_agents(settings, {"main", "researcher", "writer"}) is None
    assert unknown_topic_agents(settings, {"researcher", "main", "coder"}) == (
        f"telegram.groups.topics.{GROUP}.43.agent: no agent named 'writer' (agents: main, coder, researcher)"
    )
    plain = bot_settings_from_mapping(config_mapping(tmp_path, "http://127.0.0.1:9/v1"), {})
    assert unknown_topic_agents(plain, {"main"}) is None
