"""Images as the model gets them: real files written with Pillow, decoded back from the data URL."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

from PIL import ExifTags, Image

from agentgram.runtime.capabilities.attachments.images import PASS_THROUGH_BYTES, ImageCache, data_url


def decode(url: str) -> tuple[str, bytes]:
    head, _, body = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64")
    return head[len("data:") : -len(";base64")], base64.b64decode(body)


def opened(url: str) -> Image.Image:
    return Image.open(io.BytesIO(decode(url)[1]))


def rotated_jpeg(path: Path, size: tuple[int, int], orientation: int) -> Path:
    """A JPEG whose pixels are ``size`` and whose EXIF says to turn it (6: 90° clockwise)."""
    image = Image.new("RGB", size, "white")
    image.paste((255, 0, 0), (0, 0, size[0] // 4, size[1]))  # a red band on the left edge
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = orientation
    image.save(path, format="JPEG", exif=exif)
    return path


def test_a_small_upright_jpeg_is_sent_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.new("RGB", (640, 480), "blue").save(path, format="JPEG")
    mime, body = decode(data_url(path, 2048))
    assert (mime, body) == ("image/jpeg", path.read_bytes())


def test_exif_orientation_is_applied_before_the_model_sees_it(tmp_path: Path) -> None:
    path = rotated_jpeg(tmp_path / "sideways.jpg", (400, 200), orientation=6)
    image = opened(data_url(path, 2048))
    assert image.format == "JPEG"
    assert image.size == (200, 400), "turned upright: the long side is now the height"
    red, green, blue = image.convert("RGB").getpixel((100, 20))  # type: ignore[misc]
    assert red > 200 and green < 60 and blue < 60, "the left band is on top after a 90° clockwise turn"
    assert image.getexif().get(ExifTags.Base.Orientation, 1) == 1


def test_a_big_png_with_alpha_is_downscaled_and_stays_png(tmp_path: Path) -> None:
    path = tmp_path / "screen.png"
    Image.new("RGBA", (3000, 1500), (0, 128, 0, 100)).save(path, format="PNG")
    mime, body = decode(data_url(path, 1024))
    image = Image.open(io.BytesIO(body))
    assert mime == "image/png" and image.format == "PNG"
    assert image.size == (1024, 512), "the long side fits, the aspect ratio kept"
    assert image.mode == "RGBA"
    assert image.getpixel((10, 10))[3] == 100, "the transparency kept"  # type: ignore[index]


def test_a_big_opaque_png_becomes_a_jpeg(tmp_path: Path) -> None:
    path = tmp_path / "scan.png"
    Image.new("RGB", (2000, 4000), "gray").save(path, format="PNG")
    mime, body = decode(data_url(path, 1000))
    assert mime == "image/jpeg"
    assert Image.open(io.BytesIO(body)).size == (500, 1000)


def test_a_format_the_apis_do_not_take_is_reencoded(tmp_path: Path) -> None:
    path = tmp_path / "old.bmp"
    Image.new("RGB", (30, 20), "yellow").save(path, format="BMP")
    mime, _ = decode(data_url(path, 2048))
    assert mime == "image/jpeg"


def test_a_large_file_within_the_pixel_limit_is_still_reencoded(tmp_path: Path) -> None:
    path = tmp_path / "noise.png"
    Image.frombytes("RGB", (1400, 1400), os.urandom(1400 * 1400 * 3)).save(path, format="PNG")
    assert path.stat().st_size > PASS_THROUGH_BYTES
    mime, body = decode(data_url(path, 2048))
    assert mime == "image/jpeg" and len(body) < path.stat().st_size


async def test_the_cache_serves_loaded_images_and_remembers_what_is_no_image(tmp_path: Path) -> None:
    photo = tmp_path / "a.jpg"
    Image.new("RGB", (10, 10), "red").save(photo, format="JPEG")
    junk = tmp_path / "b.jpg"
    junk.write_bytes(b"not an image at all")
    cache = ImageCache(2048)
    assert cache.get(photo) is None, "nothing is read before load"
    await cache.load([photo, junk, tmp_path / "missing.jpg"])
    url = cache.get(photo)
    assert url is not None and decode(url)[1] == photo.read_bytes()
    assert cache.get(junk) is None and cache.get(tmp_path / "missing.jpg") is None


async def test_a_file_changed_on_disk_is_made_again(tmp_path: Path) -> None:
    photo = tmp_path / "a.png"
    Image.new("RGB", (10, 10), "red").save(photo, format="PNG")
    cache = ImageCache(2048)
    await cache.load([photo])
    first = cache.get(photo)
    Image.new("RGB", (12, 12), "blue").save(photo, format="PNG")
    os.utime(photo, ns=(1, 1))  # a different mtime even on a coarse clock
    assert cache.get(photo) is None, "the stale version is not served"
    await cache.load([photo])
    again = cache.get(photo)
    assert again is not None and again != first and opened(again).size == (12, 12)


async def test_the_cache_drops_the_least_recently_used_past_its_budget(tmp_path: Path) -> None:
    paths = []
    for name in "abc":
        path = tmp_path / f"{name}.png"
        Image.new("RGB", (8, 8), "red").save(path, format="PNG")
        paths.append(path)
    one = len(data_url(paths[0], 2048))
    cache = ImageCache(2048, budget_bytes=2 * one)
    await cache.load(paths[:2])
    assert cache.get(paths[0]) is not None  # a is now the most recently used
    await cache.load(paths[2:])
    assert cache.get(paths[1]) is None, "b, the least recently used, went"
    assert cache.get(paths[0]) is not None and cache.get(paths[2]) is not None
