"""``cluster.*``: a mistake is one config line naming the key and exit 2, for ``check-config`` and
``run`` alike, before anything connects; a cluster on PostgreSQL passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_cli import _config, _main, connections

__all__ = ["connections"]  # the fixture, used by name

POSTGRES = "postgresql+asyncpg://agentgram@127.0.0.1:9/agentgram"


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize(
    ("sections", "line"),
    [
        ({"cluster": {"enabled": True}}, "cluster.enabled: needs a PostgreSQL storage.url"),
        ({"cluster": {"heartbeat": 0}}, "cluster.heartbeat: a duration must be positive"),
        ({"cluster": {"heartbeat": "-1s"}}, "cluster.heartbeat: '-1s' is not a duration"),
        (
            {"cluster": {"lease_ttl": "6s", "heartbeat": 6}, "storage": {"url": POSTGRES}},
            "cluster.heartbeat: must be shorter than cluster.lease_ttl (6s), not 6s",
        ),
        (
            {"cluster": {"lease_ttl": 2}},
            "cluster.heartbeat: must be shorter than cluster.lease_ttl (2s), not 3s",
        ),
    ],
    ids=["sqlite", "heartbeat-zero", "heartbeat-negative", "heartbeat-equal", "ttl-below-default-heartbeat"],
)
def test_a_cluster_mistake_is_one_line_and_exit_2(
    sections: dict[str, Any],
    line: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    connections: list[object],
) -> None:
    code, err, out = _main(capsys, command, "--config", str(_config(tmp_path, **sections)))
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(f"config error: {line}"), err
    assert connections == []


def test_a_cluster_on_postgresql_passes_with_its_defaults_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    config = _config(tmp_path, cluster={"enabled": True}, storage={"url": POSTGRES})
    code, err, out = _main(capsys, "check-config", "--config", str(config))
    assert (code, err) == (0, [])
    assert json.loads(out)["cluster"] == {
        "enabled": True,
        "lease_ttl": 10.0,
        "heartbeat": 3.0,
        "instance_name": None,
    }
    assert connections == []


def test_one_instance_is_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, out = _main(capsys, "check-config", "--config", str(_config(tmp_path)))
    assert (code, err) == (0, []) and json.loads(out)["cluster"]["enabled"] is False
