"""Which group messages are addressed to the bot (``bot.telegram.core.groups.addressed``), on the
driver-neutral message both drivers produce: mentions counted in UTF-16 as Telegram counts, a
text mention of the bot's user, replies to the bot (not the service message that opened a forum
topic), commands for this bot or bare ones, and not another bot's."""

from __future__ import annotations

from typing import Any

from agentgram.bot.telegram.core.groups import addressed, sender_name, with_sender
from agentgram.bot.telegram.core.incoming import Chat, Entity, Message, User

BOT_ID = 42
BOT = "agentgram_bot"
GROUP = Chat(id=-1001, type="supergroup", title="Team")


class _Api:
    """What ``Message.command`` reads of the Bot API: the bot's username."""

    username = BOT
    id = BOT_ID


def _message(text: str, *entities: Entity, **fields: Any) -> Message:
    return Message(message_id=10, chat=GROUP, api=_Api(), text=text, entities=entities, **fields)  # type: ignore[arg-type]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_a_mention_of_the_bot_is_addressed_and_of_someone_else_is_not() -> None:
    assert addressed(_message(f"@{BOT} hi", Entity("mention", 0, _utf16(f"@{BOT}"))), BOT_ID, BOT)
    assert addressed(_message(f"@{BOT.upper()} hi", Entity("mention", 0, _utf16(f"@{BOT}"))), BOT_ID, BOT)
    assert not addressed(_message("@ann hi", Entity("mention", 0, 4)), BOT_ID, BOT)
    assert not addressed(_message("just talking"), BOT_ID, BOT)


def test_mention_offsets_count_utf16_code_units() -> None:
    text = f"🙂🙂 @{BOT} look"  # each emoji is two UTF-16 code units
    offset = _utf16("🙂🙂 ")
    assert addressed(_message(text, Entity("mention", offset, _utf16(f"@{BOT}"))), BOT_ID, BOT)
    assert not addressed(_message(text, Entity("mention", len("🙂🙂 "), _utf16(f"@{BOT}"))), BOT_ID, BOT)


def test_a_text_mention_of_the_bots_user_is_addressed() -> None:
    assert addressed(_message("Agent, hi", Entity("text_mention", 0, 5, user_id=BOT_ID)), BOT_ID, BOT)
    assert not addressed(_message("Ann, hi", Entity("text_mention", 0, 3, user_id=7)), BOT_ID, BOT)


def test_a_reply_to_the_bot_is_addressed_but_not_the_topics_opening_message() -> None:
    bots = _message("an answer", from_user=User(id=BOT_ID, is_bot=True))
    assert addressed(_message("and then?", reply_to_message=bots), BOT_ID, BOT)
    someone = _message("hello", from_user=User(id=7))
    assert not addressed(_message("and then?", reply_to_message=someone), BOT_ID, BOT)
    opening = Message(message_id=5, chat=GROUP, api=_Api(), from_user=User(id=BOT_ID, is_bot=True))  # type: ignore[arg-type]
    in_topic = _message("chatting", reply_to_message=opening, thread_id=5, is_topic_message=True)
    assert not addressed(in_topic, BOT_ID, BOT), "every message of a topic the bot opened 'replies' to it"


def test_commands_for_this_bot_or_bare_are_addressed_and_another_bots_are_not() -> None:
    assert addressed(_message("/stop", Entity("bot_command", 0, 5)), BOT_ID, BOT)
    assert addressed(_message(f"/stop@{BOT}", Entity("bot_command", 0, _utf16(f"/stop@{BOT}"))), BOT_ID, BOT)
    assert not addressed(_message("/stop@other_bot", Entity("bot_command", 0, 15)), BOT_ID, BOT)


def test_the_model_is_told_who_speaks() -> None:
    assert with_sender("hi", User(id=7, first_name="Ann", username="ann")) == "[Ann (@ann)]: hi"
    assert with_sender("hi", User(id=7, first_name="Ann", last_name="Lee")) == "[Ann Lee]: hi"
    assert sender_name(None) == "someone"
