"""The layer contracts of ``[tool.importlinter]`` in pyproject.toml hold (issue 11).

* ``bot`` imports ``runtime``, never the other way round;
* ``runtime`` imports no chat platform (``telegram``, ``aiogram``);
* each runtime package imports only the packages below it, and every module of
  ``runtime`` has its place in that order (``exhaustive``): a new package must
  be placed before it can land.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from importlinter import cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_layer_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert code == 0, report
    assert report.count(" KEPT") >= 3, report
