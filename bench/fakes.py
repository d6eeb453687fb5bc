"""The test fakes with timestamps taken where the event happens, on the fake's side.

:class:`TimedOpenAI` records, per chat-completion request, when the request
arrived, when it wrote the reply's first token and when its reply was
completely written (the LLM's time as the bot experiences it, minus the
network), and when a client closed a stream. :class:`TimedTelegram` resolves a
future the moment a bot message in a chat first shows a wanted text
(``sendMessage`` or ``editMessageText``; a ``sendMessageDraft`` too when the
watch asks for drafts), so "the reply is visible" is timed by the server, not
by a polling driver.
All clocks are :func:`time.perf_counter` in the one process that runs both fakes.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram

KeyOf = Callable[[dict[str, Any]], Any]
ReplyFor = Callable[[Any], Reply]


def last_user_text(body: dict[str, Any]) -> str:
    """The content of the last user message of a chat-completions request body."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


class TimedOpenAI(FakeOpenAI):
    """Answers every request with ``reply_for(key_of(body))`` and times it."""

    def __init__(self, key_of: KeyOf, reply_for: ReplyFor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handler = self._reply
        self._key_of = key_of
        self._reply_for = reply_for
        self._task_keys: dict[asyncio.Task[Any], Any] = {}
        self.spans: dict[Any, list[tuple[float, float]]] = defaultdict(list)
        self.started: dict[Any, asyncio.Future[float]] = {}
        self.closed_at: list[float] = []
        self.first_token: dict[Any, float] = {}
        """When the first request keyed so had written its first piece of text."""

    def on_start(self, key: Any) -> asyncio.Future[float]:
        """A future resolved when the first request keyed ``key`` has been read and validated."""
        return self.started.setdefault(key, asyncio.get_running_loop().create_future())

    def _reply(self, body: dict[str, Any]) -> Reply:
        key = self._key_of(body)
        task = asyncio.current_task()
        if task is not None:
            self._task_keys[task] = key
        started = self.on_start(key)
        if not started.done():
            started.set_result(time.perf_counter())
        return self._reply_for(key)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        task = asyncio.current_task()
        try:
            return await super()._chat(request)
        finally:
            key = self._task_keys.pop(task, None) if task is not None else None
            if key is not None:
                self.spans[key].append((arrived, time.perf_counter()))

    async def _play(self, out: Any, reply: Reply) -> None:
        task = asyncio.current_task()
        key = self._task_keys.get(task) if task is not None else None
        if key is None or key in self.first_token:
            return await super()._play(out, reply)
        write = out.delta

        async def timed(delta: dict[str, Any], delay: float = 0.0) -> None:
            await write(delta, delay)
            if delta.get("content"):
                self.first_token.setdefault(key, time.perf_counter())

        out.delta = timed
        return await super()._play(out, reply)

    async def _client_closed(self) -> None:
        self.closed_at.append(time.perf_counter())
        await super()._client_closed()

    def llm_seconds(self, key: Any) -> float:
        return sum(end - start for start, end in self.spans.get(key, []))


@dataclass(slots=True)
class _Watch:
    wanted: Callable[[str], bool]
    drafts: bool
    future: asyncio.Future[float] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class TimedTelegram(FakeTelegram):
    """FakeTelegram that tells the moment a chat shows a wanted text."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._watches: dict[int, list[_Watch]] = defaultdict(list)

    def expect(
        self, chat_id: int, wanted: Callable[[str], bool], *, drafts: bool = False
    ) -> asyncio.Future[float]:
        """Resolved with the time a bot message in ``chat_id`` first shows text ``wanted`` accepts
        (or, with ``drafts``, a draft does)."""
        watch = _Watch(wanted, drafts)
        self._watches[chat_id].append(watch)
        return watch.future

    def _seen(self, message: dict[str, Any], *, draft: bool = False) -> None:
        chat_id = message.get("chat", {}).get("id")
        watches = self._watches.get(chat_id)
        if not watches:
            return
        now = time.perf_counter()
        text = message.get("text") or ""
        for watch in list(watches):
            if watch.future.done():
                watches.remove(watch)
            elif (watch.drafts or not draft) and watch.wanted(text):
                watch.future.set_result(now)
                watches.remove(watch)

    async def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        message = await super()._m_sendMessage(params)
        self._seen(message)
        return message

    async def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        message = await super()._m_editMessageText(params)
        self._seen(message)
        return message

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        accepted = await super()._m_sendMessageDraft(params)
        text = str(params.get("text") or "")
        parse_mode = str(params.get("parse_mode") or "") or None
        visible, _ = self._parse_text(text, parse_mode)
        self._seen({"chat": {"id": self._chat_id(params)}, "text": visible}, draft=True)
        return accepted
