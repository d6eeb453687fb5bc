"""``send_file``: the agent sends a file from the workspace to the chat.

An image goes as a photo, anything else as a document (the adapter decides
what its platform can show as a photo). The file is recorded in the outbox
before it is sent and re-sent after a restart until the chat shows it, like
the agent's answers (:class:`~runtime.events.FileOutput`). Paths resolve like
the file tools': inside the workdir it is allowed by default, anywhere else it
asks (``@fs_read_outside``), and protected files (the config, the database)
are refused whatever the rules say.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import Protocol

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.infra.errors import ToolError

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif"})


class FileSender(Protocol):
    """Where ``send_file`` hands a file: the runtime records it and its adapter uploads it."""

    @property
    def max_upload_bytes(self) -> int: ...

    async def send_file(
        self, session_id: int, path: Path, caption: str | None, *, as_photo: bool
    ) -> None: ...


class SendFileArgs(ToolArgs):
    path: str = Field(description="The file to send, relative to the working directory or absolute.")
    caption: str | None = Field(default=None, max_length=1024, description="A short text shown with it.")


class SendFile(Tool[SendFileArgs]):
    name = "send_file"
    description = (
        "Send a file to the user's chat: an image is shown as a photo, anything else as a document. "
        "Use it for files you made (a chart, a report, an archive)."
    )
    group = ToolGroup.FS_READ
    Args = SendFileArgs

    def __init__(self, sender: FileSender) -> None:
        self._sender = sender

    def target(self, args: SendFileArgs, ctx: ToolContext) -> str:
        return str(ctx.resolve(args.path))

    def call_group(self, args: SendFileArgs, ctx: ToolContext) -> ToolGroup:
        inside = ctx.inside_workdir(ctx.resolve(args.path))
        return ToolGroup.FS_READ if inside else ToolGroup.FS_READ_OUTSIDE

    def reads(self, args: SendFileArgs, ctx: ToolContext) -> Path:
        return ctx.resolve(args.path)

    def guard(self, args: SendFileArgs, ctx: ToolContext) -> None:
        ctx.protected.check(ctx.resolve(args.path))

    async def execute(self, args: SendFileArgs, ctx: ToolContext) -> str:
        path = ctx.resolve(args.path)
        ctx.protected.check(path)
        size = await asyncio.to_thread(_size_of, path)
        limit = self._sender.max_upload_bytes
        if size > limit:
            raise ToolError(
                f"{path.name} is {_mb(size)}; the chat takes files up to {_mb(limit)}. Send a smaller file "
                "(compress or split it)."
            )
        as_photo = path.suffix.lower() in IMAGE_SUFFIXES
        await self._sender.send_file(ctx.session_id, path, args.caption, as_photo=as_photo)
        kind = "photo" if as_photo else "document"
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return f"sent {path.name} ({_mb(size)}, {mime}) to the chat as a {kind}"


def _size_of(path: Path) -> int:
    if not path.exists():
        raise ToolError(f"file not found: {path}")
    if not path.is_file():
        raise ToolError(f"{path} is not a file")
    return path.stat().st_size


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB" if size >= 100 * 1024 else f"{size / 1024:.1f} KB"


__all__ = ["FileSender", "SendFile"]
