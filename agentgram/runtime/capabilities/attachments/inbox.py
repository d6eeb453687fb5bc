"""The inbox: a message's files fetched into the workspace and voice notes transcribed, before the
turn that reads the message.

Mailbox first: the adapter posts the message with its attachments' metadata
(kind, name, mime, size, the platform's file id); :meth:`Inbox.assign` gives
each a workspace path (``inbox/<date>/<name>``, collision-free) *before* the
mail is stored, so the stored mail says where its files go. As soon as the
mail is stored, :meth:`Inbox.start` fetches in the background — off the
message path: the next message is not held up — through the adapter's
:class:`FileSource` into ``<path>.part``, renamed when complete.

The turn that folds the mail in (its first step, or a round's receive point
— docs/architecture/mailbox.md — for a message sent mid-turn) awaits :meth:`Inbox.prepare`: the files' states
(``ready`` / ``failed`` / ``skipped``, why, a transcript) go into the user
row's ``meta``, a voice note's transcript becomes the user's text
(``(voice) …``), and the chat is told what was heard. The result is stored
(:mod:`runtime.storage.prepared_rows`) before anyone is told, so a process
that restarts with the mail unread reuses it; one that died mid-fetch fetches
again (a complete file is never fetched twice). ``/stop`` cancels the
session's fetches (:meth:`Inbox.cancel_session`); the stop then drops the mail.

Nothing here knows a chat platform: the fetch is the adapter's
:class:`FileSource`, the transcription a :class:`Transcriber`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from agentgram.runtime.core.mailbox.envelope import Attachment, Envelope, UserMessageBody
from agentgram.runtime.infra.config import TranscriptionSettings
from agentgram.runtime.infra.errors import FetchFailed, TranscriptionFailed
from agentgram.runtime.infra.events import Address, AttachmentAction, AttachmentActivity, EventBus
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.prepared_rows import PreparedStore
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("attachments")

INBOX_DIR = "inbox"
SPOKEN = frozenset({"voice", "audio", "video_note"})
"""Kinds that are transcribed."""
NOT_FETCHED = frozenset({"sticker"})
"""Kinds that are never fetched: the message's text says what they were."""
_EXTENSIONS = {"photo": ".jpg", "voice": ".ogg", "video_note": ".mp4", "video": ".mp4", "animation": ".mp4"}
_MIME_EXTENSIONS = {
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "audio/mp4": ".m4a",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
}
_UNSAFE = re.compile(r"[^\w.\- ]+", re.UNICODE)

Notify = Callable[..., Awaitable[None]]
"""``runtime.Runtime.notice``: a durable, localized line for the user."""


class PreparationStopped(Exception):
    """A /stop cancelled the fetch the caller waited for (the stop mail settles that message)."""


class FileSource(Protocol):
    """Where an attachment's bytes come from: the chat adapter's download."""

    async def fetch(self, file_id: str, dest: Path) -> None:
        """Write the file to ``dest`` (its folder exists); raise :class:`FetchFailed` saying why not."""
        ...


class Transcriber(Protocol):
    async def transcribe(self, path: Path, *, mime_type: str | None) -> str:
        """The words spoken in ``path``; :class:`TranscriptionFailed` saying why not."""
        ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class Inbox:
    """Attachments of the runtime's sessions: paths, fetches, transcriptions, their stored results."""

    workdir: Path
    store: PreparedStore
    bus: EventBus
    notify: Notify
    transcription: TranscriptionSettings
    transcriber: Transcriber | None = None
    source: FileSource | None = None  # set by the adapter (Runtime.set_file_source)
    _work: dict[str, asyncio.Task[list[dict[str, Any]]]] = field(default_factory=dict)
    _sessions: dict[str, int] = field(default_factory=dict)
    _reserved: set[str] = field(default_factory=set)
    _tasks: TaskSet = field(default_factory=lambda: TaskSet("attachments"))

    # --- paths ----------------------------------------------------------------------------------------

    def assign(self, attachments: Sequence[Attachment], now: datetime) -> list[Attachment]:
        """Each attachment with the workspace path it will be saved to (unless it is not fetched)."""
        assigned = []
        for attachment in attachments:
            if attachment.skipped or attachment.kind in NOT_FETCHED or not attachment.file_id:
                assigned.append(attachment)
                continue
            assigned.append(attachment.model_copy(update={"path": self._free_path(attachment, now)}))
        return assigned

    def _free_path(self, attachment: Attachment, now: datetime) -> str:
        folder = f"{INBOX_DIR}/{now:%Y-%m-%d}"
        stem, suffix = _name_parts(attachment, now)
        candidate, n = f"{folder}/{stem}{suffix}", 1
        while candidate in self._reserved or (self.workdir / candidate).exists():
            n += 1
            candidate = f"{folder}/{stem} ({n}){suffix}"
        self._reserved.add(candidate)
        return candidate

    # --- preparing ------------------------------------------------------------------------------------

    def start(self, envelope: Envelope, address: Address) -> None:
        """Begin fetching a stored message's files (idempotent; a mailbox listener calls it)."""
        body = envelope.body
        if not isinstance(body, UserMessageBody) or not body.attachments or envelope.id in self._work:
            return
        self._sessions[envelope.id] = envelope.session_id
        self._work[envelope.id] = self._tasks.spawn(
            self._prepare(envelope, body, address), name=f"attachments-{envelope.id}", report=False
        )

    async def prepare(
        self, envelopes: Iterable[Envelope], address: Address
    ) -> dict[str, list[dict[str, Any]]]:
        """The prepared attachments of each message that has any, by envelope id (awaited)."""
        prepared: dict[str, list[dict[str, Any]]] = {}
        for envelope in envelopes:
            if isinstance(envelope.body, UserMessageBody) and envelope.body.attachments:
                self.start(envelope, address)
                task = self._work[envelope.id]
                try:
                    prepared[envelope.id] = await asyncio.shield(task)
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if task.cancelled() and not (current is not None and current.cancelling()):
                        self._forget(envelope.id)  # a /stop cancelled the fetch: the stop settles the mail
                        raise PreparationStopped(envelope.id) from None
                    raise
                self._forget(envelope.id)
        return prepared

    def cancel_session(self, session_id: int) -> int:
        """``/stop``: the session's fetches and transcriptions end now; how many."""
        ids = [envelope_id for envelope_id, sid in self._sessions.items() if sid == session_id]
        for envelope_id in ids:
            task = self._work.get(envelope_id)
            if task is not None:
                task.cancel()
            self._forget(envelope_id)  # the stop drops the mail: nobody awaits it later
        return len(ids)

    def busy(self, session_id: int) -> bool:
        return any(sid == session_id for sid in self._sessions.values())

    async def close(self) -> None:
        await self._tasks.close()

    def _forget(self, envelope_id: str) -> None:
        self._work.pop(envelope_id, None)
        self._sessions.pop(envelope_id, None)

    async def _prepare(
        self, envelope: Envelope, body: UserMessageBody, address: Address
    ) -> list[dict[str, Any]]:
        stored = await self.store.get(envelope.id)
        if stored is not None:  # prepared by a process before a restart: told already
            return stored
        self.bus.emit(AttachmentActivity(to=address, action=AttachmentAction.FETCHING))
        try:
            prepared = [await self._one(attachment, address) for attachment in body.attachments]
        finally:
            self.bus.emit(AttachmentActivity(to=address, action=AttachmentAction.IDLE))
        await durable(self.store.put(envelope.id, envelope.session_id, prepared))
        for attachment in body.attachments:
            if attachment.path is not None:
                self._reserved.discard(attachment.path)
        await self._tell(prepared, body, address)
        return prepared

    async def _one(self, attachment: Attachment, address: Address) -> dict[str, Any]:
        state: dict[str, Any] = {**attachment.model_dump(mode="json"), "status": "ready", "error": None}
        state["transcript"] = attachment.transcript
        if attachment.skipped or attachment.path is None:
            state.update(status="skipped", error=attachment.skipped or f"a {attachment.kind} is not fetched")
            return state
        try:
            await self._fetch(attachment)
        except FetchFailed as exc:
            state.update(status="failed", error=str(exc))
            return state
        except Exception as exc:  # a bug or an I/O error: the message still reaches the model
            log.exception("fetching %s failed", attachment.path)
            state.update(status="failed", error=f"the download failed ({type(exc).__name__})")
            return state
        if attachment.kind in SPOKEN and state["transcript"] is None:
            state.update(await self._transcribe(attachment, address))
        return state

    async def _fetch(self, attachment: Attachment) -> None:
        assert attachment.path is not None and attachment.file_id is not None
        dest = self.workdir / attachment.path
        if await asyncio.to_thread(dest.is_file):
            return  # fetched completely before a restart
        if self.source is None:
            raise FetchFailed("files cannot be fetched here (no chat adapter set a file source)")
        await asyncio.to_thread(dest.parent.mkdir, parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        await self.source.fetch(attachment.file_id, part)
        await asyncio.to_thread(part.replace, dest)

    async def _transcribe(self, attachment: Attachment, address: Address) -> dict[str, Any]:
        if not self.transcription.enabled or self.transcriber is None:
            return {"error": "voice transcription is turned off (transcription.enabled)"}
        assert attachment.path is not None
        self.bus.emit(AttachmentActivity(to=address, action=AttachmentAction.TRANSCRIBING))
        try:
            text = await self.transcriber.transcribe(
                self.workdir / attachment.path, mime_type=attachment.mime_type
            )
        except TranscriptionFailed as exc:
            return {"error": f"transcription failed: {exc}"}
        except Exception as exc:
            log.exception("transcribing %s failed", attachment.path)
            return {"error": f"transcription failed ({type(exc).__name__})"}
        finally:
            self.bus.emit(AttachmentActivity(to=address, action=AttachmentAction.FETCHING))
        return {"transcript": text.strip()}

    async def _tell(self, prepared: list[dict[str, Any]], body: UserMessageBody, address: Address) -> None:
        """What the user is told: what was heard (as a reply to the voice note), what failed."""
        for state in prepared:
            if state["kind"] in SPOKEN and state["status"] == "ready":
                if state.get("transcript"):
                    await self.notify(
                        address,
                        "voice-transcript",
                        {"text": state["transcript"]},
                        refers_to_message=body.chat_message_id,
                    )
                elif state.get("error"):
                    await self.notify(
                        address,
                        "voice-failed",
                        {"reason": state["error"]},
                        refers_to_message=body.chat_message_id,
                    )
            elif state["status"] == "failed":
                name = state.get("name") or state["kind"]
                await self.notify(
                    address,
                    "attachment-failed",
                    {"name": name, "reason": state["error"] or ""},
                    refers_to_message=body.chat_message_id,
                )


def spoken_text(text: str, prepared: Sequence[dict[str, Any]]) -> str:
    """The user's text of a message: a transcribed voice note's words first, marked spoken."""
    heard = [
        f"(voice) {state['transcript']}"
        for state in prepared
        if state["kind"] in SPOKEN and state.get("transcript")
    ]
    return "\n".join([*heard, text] if text else heard)


def _name_parts(attachment: Attachment, now: datetime) -> tuple[str, str]:
    if attachment.name:
        name = _UNSAFE.sub("_", Path(attachment.name).name).strip(" .") or "file"
        path = Path(name)
        return path.stem or "file", path.suffix
    suffix = _EXTENSIONS.get(attachment.kind) or _MIME_EXTENSIONS.get(attachment.mime_type or "", "")
    return f"{attachment.kind}-{now:%H%M%S}", suffix


__all__ = ["INBOX_DIR", "FileSource", "Inbox", "PreparationStopped", "Transcriber", "spoken_text"]
