"""Files the agent writes follow the process umask; agentgram's own files stay private.

Regression (issue 25): ``write_file`` created every file ``0600`` (``tempfile.mkstemp``), so a
script the agent wrote for the user was not even readable by the user's group. The database with
its WAL and SHM files stays ``0600`` whatever the umask (``tests/runtime/infra/storage``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.capabilities.tools.files import EditFile, WriteFile, atomic_write
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


async def write(ctx: ToolContext, path: str, content: str) -> str:
    tool = WriteFile()
    return await tool.execute(tool.parse({"path": path, "content": content}), ctx)


async def test_a_file_the_agent_writes_is_0644_while_the_database_stays_0600(
    tmp_path: Path, umask_022: None
) -> None:
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    db_file = tmp_path / "data" / "agentgram.db"
    db = Database(f"sqlite+aiosqlite:///{db_file}")
    try:
        await migrate(db)
        await write(ToolContext(workdir=workdir), "bin/report.sh", "#!/bin/sh\necho hi\n")
        assert mode(workdir / "bin" / "report.sh") == 0o644
        assert mode(db_file) == mode(Path(f"{db_file}-wal")) == 0o600
    finally:
        await db.close()
    assert not [p.name for p in (workdir / "bin").iterdir() if p.name.endswith(".tmp")], "no temp file left"


@pytest.mark.parametrize(("umask", "expected"), [(0o077, 0o600), (0o002, 0o664), (0o000, 0o666)])
def test_a_new_file_gets_exactly_what_the_umask_allows(tmp_path: Path, umask: int, expected: int) -> None:
    before = os.umask(umask)
    try:
        atomic_write(tmp_path / "out.txt", b"x")
    finally:
        os.umask(before)
    assert mode(tmp_path / "out.txt") == expected


async def test_a_replaced_file_keeps_its_own_mode(tmp_path: Path, umask_022: None) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo one\n")
    os.chmod(script, 0o750)
    ctx = ToolContext(workdir=tmp_path)
    await write(ctx, "run.sh", "echo two\n")
    assert mode(script) == 0o750
    edit = EditFile()
    await edit.execute(edit.parse({"path": "run.sh", "old_text": "two", "new_text": "three"}), ctx)
    assert (mode(script), script.read_text()) == (0o750, "echo three\n")
