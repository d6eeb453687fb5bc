"""The images an MCP tool returns: saved under the workdir, named in the result, found again.

OpenAI-compatible APIs take no image in a ``tool`` message, so the result the
model reads keeps a note per image, ``[image 1: image/png, saved as
.agentgram/tool-images/<sha256>.png]``, and the context builder
(:mod:`runtime.turn.context`) sends the images themselves to a vision model in a
user message after that round's tool results. The bytes are written (and
synced) before the result is recorded, named by their hash, so a restart shows
the same context and the same image returned twice is one file.

The note is the record: :func:`noted_images` reads the paths back from a stored
result. A list of its own would need a ``tool_calls`` column, and the result
reaches storage as text through the turn loop; the note's shape is strict (the
directory, a 64-digit hash) and only ever read from MCP results, so it points at
nothing but an image a tool returned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import re
from pathlib import Path

from agentgram.runtime.capabilities.tools.files import atomic_write

TOOL_IMAGES = ".agentgram/tool-images"
"""Where returned images are kept, relative to the workdir."""

SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif"}
_NOTE = re.compile(
    rf"^\[image \d+: [^,\]]+, saved as ({re.escape(TOOL_IMAGES)}/[0-9a-f]{{64}}\.[A-Za-z0-9]+)\]$", re.M
)


def image_note(workdir: Path, index: int, mime: str, data: str) -> str:
    """Save one image part (``data`` in base64) and return the line the model reads for it."""
    try:
        path = save_image(workdir, mime, base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError, OSError) as exc:
        return f"[image {index}: {mime} — could not be saved: {type(exc).__name__}]"
    return f"[image {index}: {mime}, saved as {path}]"


def save_image(workdir: Path, mime: str, body: bytes) -> str:
    """Write ``body`` as ``.agentgram/tool-images/<sha256><suffix>`` (synced, replaced atomically);
    the workdir-relative path."""
    suffix = SUFFIXES.get(mime) or mimetypes.guess_extension(mime) or ".img"
    relative = f"{TOOL_IMAGES}/{hashlib.sha256(body).hexdigest()}{suffix}"
    target = workdir / relative
    if target.exists():
        return relative
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, body)  # a thread saving the same image meanwhile writes the same bytes
    return relative


def noted_images(result: str) -> list[str]:
    """The workdir-relative paths of the images a stored MCP result names, in order."""
    return _NOTE.findall(result)
