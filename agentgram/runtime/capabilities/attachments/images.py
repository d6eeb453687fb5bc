"""Images as the model sees them: ``data:`` URLs, made once and kept in memory.

A photo on disk becomes a base64 ``data:`` URL. A file that needs no change is
sent as it is, byte for byte: it is no larger than ``max_image_px`` on its long
side, its EXIF orientation is normal, it is a JPEG, PNG, WebP or a still GIF,
and it is at most :data:`PASS_THROUGH_BYTES`. Any other file is decoded with
Pillow. Its EXIF orientation is applied and it is downscaled. Then it is
re-encoded: PNG when it has transparency, else JPEG.

Decoding is slow. The round awaits :meth:`ImageCache.load` for the paths its
context will show, which works in a thread. The sync context build then reads
them with :meth:`ImageCache.get`. Entries are keyed by (path, mtime, size), so
a file changed on disk is made again. The cache drops its least recently used
entries past a byte budget.
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # Pillow is imported on the first image: ~2.5 MB a bot without photos never needs
    from PIL import Image

from agentgram.runtime.infra.log import get_logger, payload

log = get_logger("attachments")

PASS_THROUGH_BYTES = 4 * 1024 * 1024
"""A file larger than this is re-encoded even when it needs no other change. Providers cap an
image at 5 MB (Anthropic) to 20 MB (OpenAI)."""
JPEG_QUALITY = 85
WIRE_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}
"""Formats every vision API takes as they are (GIF only when it is not animated)."""


@dataclass(slots=True, frozen=True)
class _Key:
    path: Path
    mtime_ns: int
    size: int


class Images(Protocol):
    """Where the images the model sees are read from (:class:`ImageCache`, or :data:`NO_IMAGES`)."""

    @property
    def sends(self) -> bool:
        """Whether any image is sent at all (``False``: every image is only its ``[image: …]`` line)."""
        ...

    async def load(self, paths: Iterable[Path]) -> None: ...

    def get(self, path: Path) -> str | None: ...


class _NoImages:
    """Vision is off: no image is read, none is sent."""

    sends = False

    async def load(self, paths: Iterable[Path]) -> None:
        return None

    def get(self, path: Path) -> str | None:
        return None


NO_IMAGES: Images = _NoImages()


class ImageCache:
    """Data URLs of images on disk. The cache keeps at most ``budget_bytes`` of them and drops the
    least recently used first. A file that is no image is remembered as ``None`` so it is not
    decoded again every round."""

    sends = True

    def __init__(self, max_px: int, *, budget_bytes: int = 64 * 1024 * 1024) -> None:
        self._max_px = max_px
        self._budget = budget_bytes
        self._urls: OrderedDict[_Key, str | None] = OrderedDict()
        self._bytes = 0

    async def load(self, paths: Iterable[Path]) -> None:
        """Make the data URLs of ``paths`` that are not cached yet, in a worker thread."""
        missing = [key for key in map(_key, paths) if key is not None and key not in self._urls]
        if not missing:
            return
        made = await asyncio.to_thread(lambda: [(key, self._make(key.path)) for key in missing])
        for key, url in made:
            self._put(key, url)

    def get(self, path: Path) -> str | None:
        """The data URL of ``path`` if :meth:`load` made it. ``None`` if it is no readable image,
        has changed since, or was never loaded."""
        key = _key(path)
        if key is None or key not in self._urls:
            return None
        self._urls.move_to_end(key)
        return self._urls[key]

    def _make(self, path: Path) -> str | None:
        from PIL import Image, UnidentifiedImageError

        try:
            return data_url(path, self._max_px)
        except (OSError, UnidentifiedImageError, Image.DecompressionBombError, ValueError) as exc:
            log.warning("image %s cannot be shown: %s", payload(path.name), type(exc).__name__)
            return None

    def _put(self, key: _Key, url: str | None) -> None:
        for stale in [k for k in self._urls if k.path == key.path]:  # an older version of the file
            self._drop(stale)
        self._urls[key] = url
        self._bytes += len(url or "")
        while self._bytes > self._budget and len(self._urls) > 1:
            self._drop(next(iter(self._urls)))

    def _drop(self, key: _Key) -> None:
        self._bytes -= len(self._urls.pop(key) or "")


def _key(path: Path) -> _Key | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return _Key(path, stat.st_mtime_ns, stat.st_size)


def data_url(path: Path, max_px: int) -> str:
    """The ``data:`` URL the model gets for the image at ``path``. Raises when the file is no image."""
    from PIL import Image

    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as image:
        mime = WIRE_FORMATS.get(image.format or "")
        if mime is not None and len(raw) <= PASS_THROUGH_BYTES and _as_is(image, max_px):
            return _encode(mime, raw)
        mime, body = _reencode(image, max_px)
    return _encode(mime, body)


def _as_is(image: Image.Image, max_px: int) -> bool:
    from PIL import ExifTags

    """The model can take ``image``'s bytes as they are: small enough, upright, not animated."""
    upright = image.getexif().get(ExifTags.Base.Orientation, 1) == 1
    animated = bool(getattr(image, "is_animated", False))
    return max(image.size) <= max_px and upright and not animated


def _reencode(image: Image.Image, max_px: int) -> tuple[str, bytes]:
    from PIL import Image, ImageOps

    image.draft("RGB", (max_px, max_px))  # JPEG: decode at a reduced scale, far faster
    upright = ImageOps.exif_transpose(image)
    upright.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    if _has_alpha(upright):
        upright.save(out, format="PNG", optimize=True)
        return "image/png", out.getvalue()
    upright.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
    return "image/jpeg", out.getvalue()


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def _encode(mime: str, body: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}"
