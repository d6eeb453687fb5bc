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

    def send_photo(
        self, content: bytes, caption: str | None = None, media_group_id: str | None = None, **kwargs: Any
    ) -> int:
        """The user sends a photo (``content`` is its largest size); returns the update id."""
        return self.tg.send_photo(
            ALLOWED_USER, content, caption=caption, media_group_id=media_group_id, **kwargs
        )

    def send_voice(
        self, content: bytes, duration: int = 3, transcript: str | None = None, **kwargs: Any
    ) -> int:
        """The user sends a voice note; ``transcript`` is one Telegram Premium already made."""
        return self.tg.send_voice(ALLOWED_USER, content, duration=duration, transcript=transcript, **kwargs)

    def send_document(
        self, content: bytes, name: str, mime: str, caption: str | None = None, **kwargs: Any
    ) -> int:
        """The user sends a file named ``name``; ``size=`` claims another size (see ``add_file``)."""
        return self.tg.send_user_document(
            ALLOWED_USER, name, content, mime_type=mime, caption=caption, **kwargs
        )

    def send_sticker(self, emoji: str = "👍") -> int:
        return self.tg.send_sticker(ALLOWED_USER, emoji)

    def chat(self) -> list[SentMessage]:
        """The bot's messages the user still sees."""
        return [m for m in self.tg.messages(ALLOWED_USER) if not m.deleted]

    def texts(self) -> list[str]:
        return [m.visible_text for m in self.chat()]

    def files(self) -> list[SentMessage]:
        """The photos and documents the bot sent the user."""
        return self.tg.files_sent(ALLOWED_USER)

    def drafted(self, needle: str) -> bool:
        """The user was shown ``needle`` in a draft: a reply streaming in their private chat."""
        return any(needle in text for text in self.tg.draft_texts(ALLOWED_USER))
