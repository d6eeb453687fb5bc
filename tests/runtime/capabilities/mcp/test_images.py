"""Saving a returned image (runtime.mcp.images): two threads saving the same image at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentgram.runtime.capabilities.mcp.images import TOOL_IMAGES, save_image


def test_threads_saving_the_same_image_at_once_all_succeed_and_leave_one_file(tmp_path: Path) -> None:
    body = b"\\x89PNG same bytes" * 4096
    ready = threading.Barrier(8)

    def save() -> str:
        ready.wait()
        return save_image(tmp_path, "image/png", body)

    with ThreadPoolExecutor(8) as pool:
        paths = set(pool.map(lambda _: save(), range(8)))
    (path,) = paths
    assert (tmp_path / path).read_bytes() == body
    assert [p.name for p in (tmp_path / TOOL_IMAGES).iterdir()] == [Path(path).name]  # no partial left
