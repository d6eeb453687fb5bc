"""The checkpoint service without a chat (issue 30): what is recorded, skipped and listed; a
command's effect captured from its two scans; a rollback refused while a command runs (naming it),
never leaving the workdir, and finished by :meth:`Checkpoints.recover` after a crash."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.checkpoints import Checkpoints, RollbackStatus, Store
from agentgram.runtime.capabilities.checkpoints.store import Plan, Step


class Told:
    def __init__(self) -> None:
        self.notes: list[tuple[int, str]] = []

    async def __call__(self, session_id: int, text: str) -> None:
        self.notes.append((session_id, text))


def make(tmp_path: Path, *, commands: bool = False, busy: bool = False) -> tuple[Checkpoints, Path, Told]:
    workdir = tmp_path / "work"
    workdir.mkdir()
    told = Told()
    service = Checkpoints(
        Store(tmp_path / "store", workdir, max_bytes=1000),
        commands=commands,
        keep=timedelta(days=7),
        busy=lambda session_id: busy,
        tell=told,
        now=lambda: datetime.now(UTC),
    )
    return service, workdir, told


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def write(service: Checkpoints, turn_id: int, path: Path, text: str) -> None:
    """What ``write_file`` does: the write inside the turn's ``change``."""
    async with service.for_turn(1, turn_id).change(await asyncio.to_thread(path.resolve)):
        await asyncio.to_thread(_put, path, text)


async def test_ignored_paths_and_large_files_are_skipped_and_listed(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path)
    (workdir / "big.bin").write_text("x" * 2000)
    await write(service, 1, workdir / "node_modules" / "pkg" / "index.js", "code")
    await write(service, 1, workdir / "inbox" / "photo.txt", "sent")
    await write(service, 1, workdir / "big.bin", "y" * 3000)
    await write(service, 1, workdir / "ok.txt", "fine\n")
    [turn] = await service.changed_turns(1)
    assert [f.path for f in turn.files] == ["ok.txt"]
    skipped = dict(turn.skipped)
    assert skipped["node_modules/pkg/index.js"] == "ignored path"
    assert skipped["inbox/photo.txt"].startswith("the inbox")
    assert "larger than" in skipped["big.bin"]


async def test_a_write_that_changes_nothing_leaves_no_checkpoint(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path)
    (workdir / "same.txt").write_text("same\n")
    await write(service, 1, workdir / "same.txt", "same\n")
    assert await service.changed_turns(1) == []


async def test_a_command_is_captured_from_its_scans_and_refuses_a_rollback_while_it_runs(
    tmp_path: Path,
) -> None:
    service, workdir, told = make(tmp_path, commands=True)
    (workdir / "a.txt").write_text("a\n")
    await write(service, 1, workdir / "w.txt", "written\n")
    started, release = asyncio.Event(), asyncio.Event()

    async def command() -> None:
        async with service.for_turn(1, 2).command("make build"):
            (workdir / "a.txt").write_text("changed\n")
            (workdir / "out.txt").write_text("built\n")
            started.set()
            await release.wait()

    running = asyncio.create_task(command())
    await started.wait()
    refused = await service.undo(1, 1)
    assert refused.status is RollbackStatus.COMMAND_RUNNING and refused.command == "make build"
    release.set()
    await running
    turns = await service.changed_turns(1)
    assert [t.turn_id for t in turns] == [2, 1]
    assert {f.path: f.how for f in turns[0].files} == {"a.txt": "changed", "out.txt": "created"}

    preview = await service.preview(1, 1)
    assert preview is not None and [t.turn_id for t in preview.later] == [2]
    done = await service.undo(1, 1)
    assert done.status is RollbackStatus.DONE and done.turn_ids == (1, 2)
    assert (workdir / "a.txt").read_text() == "a\n"
    assert not (workdir / "out.txt").exists() and not (workdir / "w.txt").exists()
    assert told.notes and "out.txt" in told.notes[0][1]


async def test_a_running_turn_refuses_a_rollback(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path, busy=True)
    await write(service, 1, workdir / "w.txt", "written\n")
    assert (await service.undo(1, 1)).status is RollbackStatus.TURN_RUNNING
    assert (workdir / "w.txt").exists()


async def test_another_sessions_turn_cannot_be_rolled_back(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path)
    await write(service, 1, workdir / "w.txt", "written\n")
    assert (await service.undo(2, 1)).status is RollbackStatus.GONE
    assert await service.preview(2, 1) is None


async def test_a_plan_that_leads_outside_the_workdir_is_refused(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (workdir / "link").symlink_to(tmp_path)
    for rel in ("../outside.txt", "link/outside.txt"):
        with pytest.raises(ValueError, match="outside the workdir"):
            service.store.apply(
                Plan(session_id=1, turn_ids=[1], steps=[Step(path=rel, restore=None)], note="")
            )
    assert outside.read_text() == "keep me"


async def test_recover_finishes_a_rollback_a_crash_cut_short(tmp_path: Path) -> None:
    service, workdir, told = make(tmp_path)
    (workdir / "f.txt").write_text("before\n")
    await write(service, 1, workdir / "f.txt", "after\n")
    record = service.store.load_turn(1)
    assert record is not None and record.files["f.txt"].before is not None
    plan = Plan(
        session_id=1,
        turn_ids=[1],
        steps=[Step(path="f.txt", restore=record.files["f.txt"].before)],
        note="undone",
    )
    service.store.save_plan(plan)  # as a crash right after storing the plan leaves it
    await service.recover()
    assert (workdir / "f.txt").read_text() == "before\n"
    assert service.store.load_plan() is None and told.notes == [(1, "undone")]
    assert await service.changed_turns(1) == []


async def test_old_checkpoints_are_pruned_with_their_copies(tmp_path: Path) -> None:
    service, workdir, _ = make(tmp_path)
    await write(service, 1, workdir / "f.txt", "content\n")
    service.now = lambda: datetime.now(UTC) + timedelta(days=8)
    assert await service.prune() == 1
    assert await service.changed_turns(1) == []
    assert not [p for p in (tmp_path / "store" / "blobs").rglob("*") if p.is_file()]
