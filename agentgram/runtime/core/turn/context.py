"""Context building: stored history → the messages one LLM request sends.

Order (docs/architecture/context.md), optimised for provider
prefix caches:

1. a static system message — byte-identical across turns;
   then the session's scratchpad (and todo list) as its own system message, if
   it has any — so a note changed mid-turn never touches the static prefix;
   then the compaction summary of the older history, if there is one
   (:mod:`runtime.turn.compaction`);
2. the conversation: consecutive user rows coalesced into one user message,
   each assistant row followed by exactly one tool message per call, the
   content derived from the call's status;
3. a dynamic tail system message (time with IANA zone, OS, working dir).

Truncation to ``max_history_messages`` drops whole entries from the front, so
a tool call is never separated from its result; under compaction nothing is
truncated (the compactor owns the budget: dropping by count would lose what
should be summarised). Tool results from earlier
turns (by ``turn_id``: a message injected mid-turn does not start a new one)
longer than ``max_tool_result_chars`` are replaced by a note (the database
keeps them whole).

Attachments (``meta["attachments"]`` of a user row, one dict per file as the
runtime prepared it: the mail's :class:`~runtime.mailbox.envelope.Attachment`
plus ``status``/``error``) are shown from that metadata on every round, never
stored in ``content``: a line per file after the user's text, the text of a
small UTF-8 document, and, with ``vision`` on, the image itself — for every
image of the current turn and the newest ``max_history_images`` of earlier
turns; older images (and all of them with ``vision`` off) are only their
``[image: path]`` line. The round loads those images first
(:func:`images_needed`, then :meth:`ImageCache.load`), so the build stays sync.

Images an MCP tool returned (named in its result by :mod:`runtime.mcp.images`)
count in the same window. A ``tool`` message takes no image, so a vision model
gets them in one user message right after that round's tool results; without
vision the result's note is all the model reads.
"""

from __future__ import annotations

import enum
import platform
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from agentgram.runtime.capabilities.attachments.images import NO_IMAGES, WIRE_FORMATS, Images
from agentgram.runtime.capabilities.mcp.images import noted_images
from agentgram.runtime.capabilities.mcp.tools import PREFIX as MCP_PREFIX
from agentgram.runtime.core.mailbox.envelope import Attachment
from agentgram.runtime.core.turn import texts
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ChatMessage,
    ContentPart,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.history import HistoryEntry
from agentgram.runtime.infra.storage.models import Role, RowStatus, ToolCallRow, ToolCallStatus


@dataclass(slots=True, frozen=True)
class ContextSettings:
    static_system: str
    workdir: Path
    timezone: ZoneInfo
    timezone_name: str
    max_history_messages: int = 200
    max_tool_result_chars: int | None = 4000
    vision: bool = True
    max_history_images: int = 4
    inline_text_kb: int = 32
    images: Images = NO_IMAGES
    """Where the images the model sees are read from; :data:`NO_IMAGES`: none is sent (lines only)."""


@dataclass(slots=True, frozen=True)
class Compacted:
    """The history is under compaction: the entries are those its summary does not cover, sent
    whole, after the summary's system message (``summary`` is ``""`` before the first one)."""

    summary: str = ""


def build_messages(
    entries: list[HistoryEntry],
    settings: ContextSettings,
    now: datetime,
    *,
    notes: str | None = None,
    compacted: Compacted | None = None,
) -> list[ChatMessage]:
    """``notes`` is the session's scratchpad message (:func:`runtime.tools.notes.notes_text`),
    sent on its own right after the static message, so a note changed mid-turn leaves the
    static prefix byte-identical."""
    kept = entries if compacted is not None else truncate(entries, settings.max_history_messages)
    boundary = current_turn_start(kept)
    shown = AttachmentView(settings, shown_images(kept, settings))
    conversation: list[ChatMessage] = []
    for index, entry in enumerate(kept):
        hide = settings.max_tool_result_chars if index < boundary else None
        conversation.extend(render_entry(entry, hide, shown))
    return [
        SystemMessage(settings.static_system),
        *([SystemMessage(notes)] if notes else []),
        *([SystemMessage(compacted.summary)] if compacted is not None and compacted.summary else []),
        *coalesce_users(conversation),
        SystemMessage(dynamic_tail(settings, now)),
    ]


def message_count(entry: HistoryEntry) -> int:
    return 1 + len(entry.calls)


def truncate(entries: list[HistoryEntry], limit: int) -> list[HistoryEntry]:
    """Keep the newest entries totalling at most ``limit`` messages (whole entries only)."""
    total = 0
    start = len(entries)
    while start > 0 and total + message_count(entries[start - 1]) <= limit:
        start -= 1
        total += message_count(entries[start])
    if start == len(entries) and entries:  # one huge entry: still send it whole
        start -= 1
    kept = entries[start:]
    while kept and kept[0].role != Role.USER and len(kept) > 1:
        kept = kept[1:]  # never open the conversation with an assistant row
    return kept


def current_turn_start(entries: list[HistoryEntry]) -> int:
    """Index of the current turn's first entry: everything before it belongs to earlier turns.

    The current turn is the last user row's. Rows carry their ``turn_id``, so
    a message injected mid-turn (a second user row of the same turn) does not
    make that turn's own earlier tool results "earlier" — the model may not
    even have read them yet. Rows without a turn id fall back to the last user row.
    """
    last_user = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].role == Role.USER), None)
    if last_user is None:
        return 0
    turn_id = entries[last_user].turn_id
    start = last_user
    while turn_id is not None and start > 0 and entries[start - 1].turn_id == turn_id:
        start -= 1
    return start


def render_entry(
    entry: HistoryEntry, hide_over: int | None, attachments: AttachmentView | None = None
) -> list[ChatMessage]:
    if entry.role == Role.USER:
        return [user_message(entry, attachments)]
    calls = tuple(ToolCallRequest(c.call_id, c.name, c.arguments) for c in entry.calls)
    content = entry.content
    if entry.status == RowStatus.CANCELLED and not calls:
        content = content + "\n\n[stopped by the user]" if content else "[stopped by the user]"
    messages: list[ChatMessage] = [AssistantMessage(content, calls)]
    for call in entry.calls:
        messages.append(ToolMessage(call.call_id, tool_result_text(call, hide_over)))
    returned = tool_images_message(entry.calls, attachments)
    return [*messages, returned] if returned is not None else messages


def tool_result_text(call: ToolCallRow, hide_over: int | None) -> str:
    status = ToolCallStatus(call.status)
    if status in (ToolCallStatus.PENDING, ToolCallStatus.RUNNING):
        return texts.INTERRUPTED
    result = call.result or ""
    if status == ToolCallStatus.FAILED:
        result = texts.failed_result(result)
    if hide_over is not None and len(result) > hide_over:
        return texts.hidden_result(call.name, len(result), hide_over)
    return result


def coalesce_users(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Merge consecutive user messages (injected mid-turn rows and an album's items read as one)."""
    merged: list[ChatMessage] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if isinstance(message, UserMessage) and isinstance(previous, UserMessage):
            merged[-1] = join_users(previous, message)
        else:
            merged.append(message)
    return merged


def join_users(first: UserMessage, second: UserMessage) -> UserMessage:
    """Texts join with a blank line; with images, the parts follow each other in order (where the
    two meet text to text, the texts join, so each image stays next to the line that names it)."""
    if isinstance(first.content, str) and isinstance(second.content, str):
        return UserMessage(f"{first.content}\n\n{second.content}")
    head, tail = _parts(first), _parts(second)
    if head and tail and isinstance(head[-1], TextPart) and isinstance(tail[0], TextPart):
        head, tail = (*head[:-1], TextPart(f"{head[-1].text}\n\n{tail[0].text}")), tail[1:]
    return UserMessage((*head, *tail))


def _parts(message: UserMessage) -> tuple[ContentPart, ...]:
    return (TextPart(message.content),) if isinstance(message.content, str) else message.content


def dynamic_tail(settings: ContextSettings, now: datetime) -> str:
    local = now.astimezone(settings.timezone)
    return (
        f"Current date and time: {local.isoformat(timespec='seconds')} ({settings.timezone_name})\n"
        f"Operating system: {os_description()}\n"
        f"Working directory: {settings.workdir}\n"
        "File tools and execute_cmd resolve relative paths against the working directory; no need to cd."
    )


@cache
def os_description() -> str:
    return f"{platform.system()} {platform.release()} [{platform.machine()}]"


# --- attachments ---------------------------------------------------------------------------

log = get_logger("turn")

IMAGE_MIMES = frozenset(WIRE_FORMATS.values())
"""A document of one of these types is shown as an image; any other is a file line."""
SPOKEN = {"voice": "voice note", "audio": "audio", "video_note": "video note"}
UNSHOWABLE = "could not be shown as an image"
"""An image meant to be shown that Pillow could not read (or the round did not load)."""


class AttachmentStatus(enum.StrEnum):
    READY = "ready"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(slots=True, frozen=True)
class PreparedAttachment:
    """One of a user row's ``meta["attachments"]``, parsed: the mail's item and how preparing it went."""

    item: Attachment
    status: AttachmentStatus
    error: str | None

    @property
    def is_image(self) -> bool:
        item = self.item
        return item.kind == "photo" or (item.kind == "document" and item.mime_type in IMAGE_MIMES)

    @property
    def ready_path(self) -> str | None:
        """The workspace-relative path of the saved file; ``None`` when there is none to read."""
        return self.item.path if self.status is AttachmentStatus.READY else None


def prepared_attachments(meta: dict[str, Any]) -> list[PreparedAttachment]:
    """The row's attachments; a malformed record is left out (and logged), never guessed at."""
    found: list[PreparedAttachment] = []
    for raw in meta.get("attachments") or ():
        try:
            fields = {k: v for k, v in raw.items() if k in Attachment.model_fields}
            found.append(
                PreparedAttachment(
                    Attachment.model_validate(fields), AttachmentStatus(raw.get("status")), raw.get("error")
                )
            )
        except (AttributeError, ValueError, ValidationError):
            log.warning("an attachment record in a history row is malformed; it is not shown")
    return found


def shown_images(entries: list[HistoryEntry], settings: ContextSettings) -> frozenset[str]:
    """Paths of the images the model sees: the current turn's, and the newest
    ``max_history_images`` of earlier turns."""
    if not settings.vision or not settings.images.sends:
        return frozenset()
    boundary = current_turn_start(entries)
    current = [p for e in entries[boundary:] for p in _image_paths(e)]
    earlier = [p for e in entries[:boundary] for p in _image_paths(e)]
    keep = settings.max_history_images
    return frozenset(current + (earlier[-keep:] if keep > 0 else []))


def images_needed(entries: list[HistoryEntry], settings: ContextSettings) -> list[Path]:
    """The files :meth:`ImageCache.load` must have read before :func:`build_messages` runs
    on ``entries`` (a superset when truncation drops some)."""
    return sorted(settings.workdir / path for path in shown_images(entries, settings))


def _image_paths(entry: HistoryEntry) -> Iterator[str]:
    if entry.role != Role.USER:
        for call in entry.calls:
            yield from tool_images(call)
        return
    if not entry.meta.get("attachments"):
        return
    for prepared in prepared_attachments(entry.meta):
        if prepared.is_image and prepared.ready_path:
            yield prepared.ready_path


def tool_images(call: ToolCallRow) -> list[str]:
    """The workdir-relative paths of the images a finished MCP call returned."""
    if not call.name.startswith(MCP_PREFIX) or call.status != ToolCallStatus.DONE or not call.result:
        return []
    return noted_images(call.result)


def tool_images_message(calls: Sequence[ToolCallRow], view: AttachmentView | None) -> UserMessage | None:
    """The images a round's MCP calls returned that the model is shown, after the calls' results,
    each call's under a line naming it; ``None`` when there are none."""
    if view is None:
        return None
    parts: list[ContentPart] = []
    for call in calls:
        urls = [url for path in tool_images(call) if (url := view.path_url(path)) is not None]
        if urls:
            parts.append(TextPart(f"[images returned by {call.name} (call {call.call_id})]"))
            parts.extend(ImagePart(url) for url in urls)
    return UserMessage(tuple(parts)) if parts else None


@dataclass(slots=True, frozen=True)
class AttachmentView:
    """What one build shows of attachments: the settings, and which images go as images."""

    settings: ContextSettings
    images: frozenset[str] = frozenset()

    def shows(self, prepared: PreparedAttachment) -> bool:
        """The model gets this attachment as an image (not just its line)."""
        return prepared.is_image and prepared.ready_path in self.images

    def image_url(self, prepared: PreparedAttachment) -> str | None:
        if prepared.ready_path is None or not self.shows(prepared):
            return None
        return self.path_url(prepared.ready_path)

    def path_url(self, path: str) -> str | None:
        """The data URL of the workdir-relative ``path`` if it is one of the images shown."""
        if path not in self.images:
            return None
        return self.settings.images.get(self.settings.workdir / path)

    def inline_text(self, prepared: PreparedAttachment) -> str | None:
        limit = self.settings.inline_text_kb * 1024
        path = prepared.ready_path
        if prepared.item.kind != "document" or prepared.is_image or path is None or not limit:
            return None
        if prepared.item.size is not None and prepared.item.size > limit:
            return None
        return small_text(self.settings.workdir / path, limit)


def user_message(entry: HistoryEntry, view: AttachmentView | None) -> UserMessage:
    """The user's text, a line per attachment, then inlined texts and images; a plain text
    message when there is nothing but words."""
    prepared = prepared_attachments(entry.meta) if view is not None and entry.meta.get("attachments") else []
    if view is None or not prepared:
        return UserMessage(entry.content)
    lines: list[str] = []
    extra: list[ContentPart] = []
    images: list[ContentPart] = []
    for item in prepared:
        url = view.image_url(item)
        lines.append(attachment_line(item, note=UNSHOWABLE if view.shows(item) and url is None else None))
        if url is not None:
            images.append(ImagePart(url))
        text = view.inline_text(item)
        if text is not None:
            extra.append(TextPart(f"--- {item.ready_path} ---\n{text}"))
    words = "\n\n".join(part for part in (entry.content, "\n".join(lines)) if part)
    if not extra and not images:
        return UserMessage(words)
    return UserMessage((TextPart(words), *extra, *images))


def attachment_line(prepared: PreparedAttachment, *, note: str | None = None) -> str:
    """``[file: inbox/… · 1.2 MB · application/pdf — read it with read_file]``, ``[voice note:
    inbox/….ogg, 12 s]``, ``[image: inbox/…]``; a file not there names why (``— not
    downloaded: …``, ``— failed: …``)."""
    item = prepared.item
    where = prepared.ready_path or item.name
    if prepared.is_image or item.kind == "sticker":
        label, head = "image" if prepared.is_image else "sticker", [where]
    elif item.kind in SPOKEN:
        label, head = SPOKEN[item.kind], [", ".join(filter(None, [where, _duration(item.duration)]))]
    else:
        label, head = "file", [where, _size(item.size), item.mime_type]
    described = " · ".join(filter(None, head))
    tail = note or _status_note(prepared, label)
    return f"[{label}{': ' + described if described else ''}{' — ' + tail if tail else ''}]"


def _status_note(prepared: PreparedAttachment, label: str) -> str | None:
    match prepared.status:
        case AttachmentStatus.SKIPPED:
            return f"not downloaded: {prepared.error or 'skipped'}"
        case AttachmentStatus.FAILED:
            return f"failed: {prepared.error or 'unknown reason'}"
    if prepared.error:  # saved, but a later step failed (a voice note not transcribed)
        return prepared.error
    return "read it with read_file" if label == "file" else None


def _size(size: int | None) -> str | None:
    if size is None:
        return None
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _duration(seconds: int | None) -> str | None:
    return f"{seconds} s" if seconds is not None else None


def small_text(path: Path, limit: int) -> str | None:
    """The file's text when it is at most ``limit`` bytes of UTF-8 (no NUL); else ``None``."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read_text(path, stat.st_mtime_ns, stat.st_size) if stat.st_size <= limit else None


@lru_cache(maxsize=64)
def _read_text(path: Path, mtime_ns: int, size: int) -> str | None:
    """Cached by (path, mtime, size): every round shows the file again without reading it again."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if "\x00" in text else text
