"""The allowed user's side of the fake Telegram chat, for test rigs that hold a ``tg``."""

from __future__ import annotations

from typing import Any

from tests.conftest import ALLOWED_USER
from tests.fakes.telegram_server import FakeTelegram, SentMessage


class UserChat:
    tg: FakeTelegram

    def say(self, text: str, **kwargs: Any) -> int:
        """The user writes ``text``; returns its update id."""
        return self.tg.send_text(ALLOWED_USER, text, **kwargs)

    def chat(self) -> list[SentMessage]:
        """The bot's messages the user still sees."""
        return [m for m in self.tg.messages(ALLOWED_USER) if not m.deleted]

    def texts(self) -> list[str]:
        return [m.visible_text for m in self.chat()]

    def drafted(self, needle: str) -> bool:
        """The user was shown ``needle`` in a draft: a reply streaming in their private chat."""
        return any(needle in text for text in self.tg.draft_texts(ALLOWED_USER))
