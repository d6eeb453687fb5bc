"""A built wheel works on its own: installed (not editable) into a fresh virtual environment, away
from the source tree, ``agentgram`` starts, finds its locales and checks a config — and it installs
only ``agentgram.*``, no generic top-level ``bot`` or ``runtime``."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from tests.conftest import config_mapping

ROOT = Path(__file__).resolve().parents[1]
_NOT_SOURCE = (
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".venv",
    "data",
)


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _fresh_venv_with_the_wheel(tmp_path: Path) -> Path:
    """A new venv holding only the wheel; its dependencies come from this test run's environment
    (a .pth file adds its site-packages), so the test needs no network."""
    source = tmp_path / "src"  # setuptools writes build/ beside the sources: keep the tree clean
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", source, cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("agentgram-*.whl")
    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    venv_site = Path(
        _run(python, "-c", "import site; print(site.getsitepackages()[0])", cwd=tmp_path).stdout.strip()
    )
    (venv_site / "test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = _run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    return venv


def test_a_built_wheel_installs_into_a_fresh_venv_and_checks_a_config(tmp_path: Path) -> None:
    venv = _fresh_venv_with_the_wheel(tmp_path)
    where = _run(
        venv / "bin" / "python",
        "-c",
        "import agentgram.bot as bot, agentgram.runtime.infra.i18n as i; print(bot.__file__); print(i.DEFAULT_LOCALES_DIR)",
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    module, locales = where.stdout.split()
    assert module.startswith(str(venv)) and locales.startswith(str(venv)), "the wheel's code, not the tree's"
    assert {p.name for p in Path(locales).iterdir()} >= {"en", "ru"}
    for generic in ("bot", "runtime"):  # installed only under the agentgram namespace
        found = _run(venv / "bin" / "python", "-c", f"import {generic}", cwd=tmp_path)
        assert found.returncode != 0 and "No module named" in found.stderr, (
            f"a top-level {generic!r} is installed"
        )

    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(config_mapping(tmp_path, "http://127.0.0.1:9/v1")))
    checked = _run(venv / "bin" / "agentgram", "check-config", "--config", config, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "sk-test-secret" not in checked.stdout, "secrets masked"

    version = _run(venv / "bin" / "agentgram", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "agentgram 0.1.0", version.stderr


def test_the_wheel_ships_the_web_views_templates(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", source, cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("agentgram-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    templates = {
        f"agentgram/bot/web/templates/{p.name}" for p in (ROOT / "agentgram/bot/web/templates").glob("*.html")
    }
    assert templates and templates <= shipped, sorted(templates - shipped)
