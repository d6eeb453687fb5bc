"""The documentation: the README stays a short front page whose links all resolve, and the MkDocs
site (``mkdocs.yml``, ``docs/``) builds with ``--strict`` — a broken link, a missing anchor or a page
left out of the nav fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "web-view.png").is_file(), "the web view's screenshot is published"


def test_the_readme_is_a_short_front_page_whose_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200, "the README is a front page: the rest belongs in docs/"
    local = [target for target in LINK.findall(text) if "://" not in target and not target.startswith("#")]
    assert local, "the README links onwards into docs/"
    missing = [target for target in local if not (ROOT / target.split("#", 1)[0]).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
    assert any(target.startswith("docs/") for target in local)
