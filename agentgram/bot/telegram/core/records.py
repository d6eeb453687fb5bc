"""What the chat shows that a later process must still be able to edit.

Message ids are Telegram's, so the adapter keeps them, in the runtime's
key-value store (values are JSON, parsed here; a malformed one is dropped):

- a **tool status line** — its messages, the tool calls it lists, its turn and
  language — from its first send until its turn ends with the line showing its
  final marks. One a process left behind (killed, or stopped mid-turn) is
  closed on the next start: each call reads its stored final status, or
  "⚠️ interrupted".
- an **approval prompt** — its message and its text without the reply hint —
  until its decision is shown. The decision edits the prompt whichever process
  it reaches; once shown the record is gone, so a decision a resumed turn
  reports again is not shown twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.records")

STATUS_LINE = "telegram.status_line."
PROMPT = "telegram.prompt."


class KeyValues(Protocol):
    """The runtime's key-value store (``Runtime.values``)."""

    async def get_value(self, key: str) -> str | None: ...
    async def set_value(self, key: str, value: str) -> None: ...
    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]: ...


@dataclass(slots=True, frozen=True)
class StatusLine:
    """A tool status line as the chat shows it: ``message_ids`` in order, ``call_ids`` line by line."""

    chat_id: int
    turn_id: int
    message_ids: tuple[int, ...]
    call_ids: tuple[int, ...]
    language: str | None = None
    key: str = ""  # its record's key, fixed at the first send (the line's first message)


@dataclass(slots=True, frozen=True)
class PromptShown:
    """An approval prompt in the chat: its message and ``body``, the text a decision keeps."""

    request_id: str
    message_id: int
    body: str


class ChatRecords:
    def __init__(self, store: KeyValues) -> None:
        self._store = store

    # --- status lines -----------------------------------------------------------------

    @staticmethod
    def line_key(chat_id: int, first_message_id: int) -> str:
        return f"{STATUS_LINE}{chat_id}.{first_message_id}"

    async def save_line(self, line: StatusLine) -> None:
        value = {
            "chat": line.chat_id,
            "turn": line.turn_id,
            "messages": list(line.message_ids),
            "calls": list(line.call_ids),
            "language": line.language,
        }
        await self._store.set_value(line.key, json.dumps(value))

    async def drop_line(self, line: StatusLine) -> None:
        await self._store.delete_value(line.key)

    async def lines(self) -> list[StatusLine]:
        """Every recorded status line, oldest first (a malformed record is dropped)."""
        found = []
        for key, raw in (await self._store.values_with_prefix(STATUS_LINE)).items():
            line = _parse_line(key, raw)
            if line is None:
                log.warning("dropping a malformed status-line record %s", key)
                await self._store.delete_value(key)
            else:
                found.append(line)
        return sorted(found, key=lambda line: (line.chat_id, line.message_ids[0]))

    # --- approval prompts -------------------------------------------------------------

    async def save_prompt(self, prompt: PromptShown) -> None:
        value = {"message": prompt.message_id, "body": prompt.body}
        await self._store.set_value(PROMPT + prompt.request_id, json.dumps(value, ensure_ascii=False))

    async def prompt(self, request_id: str) -> PromptShown | None:
        """The prompt whose decision is not shown yet; ``None`` once it is (or if it never was sent)."""
        raw = await self._store.get_value(PROMPT + request_id)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
            message_id, body = value["message"], value["body"]
        except (ValueError, TypeError, KeyError):
            message_id = body = None
        if not isinstance(message_id, int) or not isinstance(body, str):
            log.warning("dropping a malformed prompt record for request %s", request_id)
            await self.drop_prompt(request_id)
            return None
        return PromptShown(request_id, message_id, body)

    async def drop_prompt(self, request_id: str) -> None:
        await self._store.delete_value(PROMPT + request_id)


def _ints(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        return None
    return tuple(value)


def _parse_line(key: str, raw: str) -> StatusLine | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    chat, turn, language = value.get("chat"), value.get("turn"), value.get("language")
    messages, calls = _ints(value.get("messages")), _ints(value.get("calls"))
    if not isinstance(chat, int) or not isinstance(turn, int) or not messages or calls is None:
        return None
    if language is not None and not isinstance(language, str):
        return None
    return StatusLine(chat, turn, messages, calls, language, key)
