"""The configuration reference is generated from the models, and the example agrees with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from agentgram.bot.cli import main
from agentgram.bot.config_reference import REFERENCE, render
from agentgram.bot.settings import AgentgramSettings
from agentgram.runtime.infra.config import ADVANCED, advanced_keys, is_advanced, node_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_reference_is_what_the_models_generate() -> None:
    committed = (ROOT / REFERENCE).read_text(encoding="utf-8")
    assert committed == render(), f"{REFERENCE} is out of date: run `agentgram config-reference`"


def test_config_reference_check_says_whether_the_file_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config-reference", "--check"]) == 0
    assert capsys.readouterr().err == ""


def test_every_key_of_the_reference_has_a_type_a_default_and_a_description() -> None:
    rows = [line for line in render().splitlines() if line.startswith("| `")]
    assert len(rows) > 100
    for row in rows:
        _key, kind, default, description = (cell.strip() for cell in row.strip("|").split(" | ", 3))
        assert kind and default and description, row


def _keys(model: type[BaseModel], data: dict[str, Any], where: str) -> list[str]:
    """Keys ``data`` writes that ``model`` does not have, down every mapping the example spells."""
    unknown = []
    for key, value in data.items():
        info = model.model_fields.get(key)
        if info is None:
            unknown.append(f"{where}.{key}")
            continue
        child, held = node_model(info.annotation)
        if child is not None and not held and isinstance(value, dict) and child.model_fields:
            unknown += _keys(child, value, f"{where}.{key}")
    return unknown


def test_the_example_config_and_the_models_agree() -> None:
    """Both ways: every key the example writes is a model's key at that place (tuning knobs under
    advanced:, and only there), and every key of a section is in the example."""
    raw = yaml.safe_load((ROOT / "config.example.yml").read_text(encoding="utf-8"))
    knobs = advanced_keys(AgentgramSettings)
    assert set(raw[ADVANCED]) == set(knobs)
    for section, keys in knobs.items():
        assert list(raw[ADVANCED][section]) == keys, f"advanced.{section}"
    for section, info in AgentgramSettings.model_fields.items():
        model, _ = node_model(info.annotation)
        assert model is not None
        written = raw.get(section) or {}
        assert not _keys(model, written, section), "keys the models do not know"
        misplaced = [key for key in written if is_advanced(model.model_fields[key])]
        assert not misplaced, f"{section}: {misplaced} belong under advanced:"
        plain = [key for key, sub in model.model_fields.items() if not is_advanced(sub)]
        missing = [key for key in plain if key not in written]
        assert not missing, f"config.example.yml lacks {section}.{missing}"
    assert set(raw) == {*AgentgramSettings.model_fields, ADVANCED} - {
        name for name in knobs if all(is_advanced(sub) for sub in _section(name).model_fields.values())
    }


def _section(name: str) -> type[BaseModel]:
    model, _ = node_model(AgentgramSettings.model_fields[name].annotation)
    assert model is not None
    return model
