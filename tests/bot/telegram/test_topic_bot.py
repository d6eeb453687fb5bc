"""A bot bound to a forum topic (core/topics.py) and the port's :class:`TopicGone`, through each
driver's real client against the fake Bot API, as the adapter wires it (``make_driver`` hands
out the queued client): what the bound bot sends lands in its topic, the General topic takes the
bot itself, and a topic that is closed or deleted is told apart from any other refusal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.bot.telegram.core.chat_queue import QueuedBot, chat_turn
from agentgram.bot.telegram.core.port import HTML, BadRequest, FileUpload, Text, TopicGone
from agentgram.bot.telegram.core.topics import TopicBot, in_topic
from agentgram.bot.telegram.drivers import make_driver
from tests.conftest import make_settings
from tests.fakes.telegram_server import FakeTelegram

FORUM = -1001234567890


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        fake.add_group(FORUM, title="Forum", forum=True)
        yield fake


@pytest.fixture
async def api(tmp_path: Path, tg: FakeTelegram, telegram_library: str) -> AsyncIterator[QueuedBot]:
    settings = make_settings(
        tmp_path, "http://127.0.0.1:9/v1", tg.root, telegram={"library": telegram_library}
    )
    queued = make_driver(settings.telegram).api
    await queued.get_me()
    try:
        yield queued
    finally:
        await queued.close()


async def test_a_message_a_file_and_an_action_through_in_topic_land_in_the_topic(
    api: QueuedBot, tg: FakeTelegram
) -> None:
    ideas = tg.add_topic(FORUM, "Ideas")
    bot = in_topic(api, FORUM, ideas)
    sent = await bot.send_message(FORUM, Text("<b>idea</b>", parse_mode=HTML))
    await bot.send_file(FORUM, FileUpload(b"notes", "notes.txt", caption="the notes"))
    await bot.send_file(FORUM, FileUpload(b"\x89PNG", "a.png", as_photo=True))
    await bot.send_chat_action(FORUM, "upload_document")
    landed = tg.messages_in(FORUM, ideas)
    assert [(m.kind, m.visible_text) for m in landed] == [
        ("text", "idea"),
        ("document", "the notes"),
        ("photo", ""),
    ]
    assert landed[0].message_id == sent.message_id
    assert tg.messages_in(FORUM) == []  # nothing in General
    assert [(c.action, c.thread_id) for c in tg.chat_actions] == [("upload_document", ideas)]


async def test_a_send_that_names_its_own_thread_keeps_it(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas, bugs = tg.add_topic(FORUM, "Ideas"), tg.add_topic(FORUM, "Bugs")
    bot = in_topic(api, FORUM, ideas)
    await bot.send_message(FORUM, Text("a bug", message_thread_id=bugs))
    await bot.send_file(FORUM, FileUpload(b"log", "bug.log", message_thread_id=bugs))
    await bot.send_chat_action(FORUM, "typing", thread_id=bugs)
    assert [m.kind for m in tg.messages_in(FORUM, bugs)] == ["text", "document"]
    assert tg.messages_in(FORUM, ideas) == []
    assert [c.thread_id for c in tg.chat_actions] == [bugs]


async def test_no_topic_is_the_bot_itself_and_sends_to_the_chat(api: QueuedBot, tg: FakeTelegram) -> None:
    tg.add_topic(FORUM, "Ideas")
    assert in_topic(api, FORUM, None) is api and in_topic(api, FORUM, 0) is api
    general = in_topic(api, FORUM, None)
    await general.send_message(FORUM, Text("to General"))
    await general.send_file(FORUM, FileUpload(b"notes", "notes.txt"))
    await general.send_chat_action(FORUM, "typing")
    assert [m.kind for m in tg.messages_in(FORUM)] == ["text", "document"]  # thread None: General
    assert [c.thread_id for c in tg.chat_actions] == [None]


async def test_rebinding_a_topic_bot_wraps_the_bot_inside_once(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas, bugs = tg.add_topic(FORUM, "Ideas"), tg.add_topic(FORUM, "Bugs")
    rebound = in_topic(in_topic(api, FORUM, ideas), FORUM, bugs)
    assert isinstance(rebound, TopicBot) and (rebound.inner, rebound.thread_id) == (api, bugs)
    assert in_topic(in_topic(api, FORUM, ideas), FORUM, None) is api
    await rebound.send_message(FORUM, Text("a bug"))
    assert [m.text for m in tg.messages_in(FORUM, bugs)] == ["a bug"]


async def test_a_closed_topic_raises_topic_gone(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas = tg.add_topic(FORUM, "Ideas")
    tg.close_topic(FORUM, ideas)
    bot = in_topic(api, FORUM, ideas)
    with pytest.raises(TopicGone, match=r"(?i)^topic_closed$"):
        await bot.send_message(FORUM, Text("x"))
    with pytest.raises(TopicGone):
        await bot.send_file(FORUM, FileUpload(b"x", "x.txt"))
    with pytest.raises(TopicGone):
        await bot.send_chat_action(FORUM, "typing")
    tg.reopen_topic(FORUM, ideas)
    await bot.send_message(FORUM, Text("open again"))
    assert [m.text for m in tg.messages_in(FORUM, ideas)] == ["open again"]


async def test_a_deleted_topic_raises_topic_gone(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas = tg.add_topic(FORUM, "Ideas")
    tg.delete_topic(FORUM, ideas)
    bot = in_topic(api, FORUM, ideas)
    with pytest.raises(TopicGone, match=r"(?i)^message thread not found$"):
        await bot.send_message(FORUM, Text("x"))
    with pytest.raises(TopicGone):
        await bot.send_file(FORUM, FileUpload(b"\x89PNG", "a.png", as_photo=True))
    with pytest.raises(TopicGone):
        await bot.send_chat_action(FORUM, "typing")


async def test_topic_deleted_as_telegram_words_it_raises_topic_gone(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas = tg.add_topic(FORUM, "Ideas")
    tg.fail_next("sendMessage", status=400, description="Bad Request: TOPIC_DELETED")
    with pytest.raises(TopicGone, match=r"(?i)^topic_deleted$"):
        await in_topic(api, FORUM, ideas).send_message(FORUM, Text("x"))


async def test_a_topic_gone_is_still_a_bad_request(api: QueuedBot, tg: FakeTelegram) -> None:
    ideas = tg.add_topic(FORUM, "Ideas")
    tg.close_topic(FORUM, ideas)
    with pytest.raises(BadRequest):  # whoever handles a refusal handles a gone topic too
        await in_topic(api, FORUM, ideas).send_message(FORUM, Text("x"))


async def test_other_refusals_are_not_topic_gone(api: QueuedBot, tg: FakeTelegram) -> None:
    bot = in_topic(api, FORUM, tg.add_topic(FORUM, "Ideas"))
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities") as bad_html:
        await bot.send_message(FORUM, Text("<b>unclosed", parse_mode=HTML))
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found") as no_message:
        await bot.edit_message_text(FORUM, 9999, Text("edited"))
    assert not isinstance(bad_html.value, TopicGone)
    assert not isinstance(no_message.value, TopicGone)


async def test_a_topic_bot_holds_its_chats_turn(api: QueuedBot, tg: FakeTelegram) -> None:
    """:func:`chat_turn` through a bound bot holds the chat's one queue: another sender to the
    chat (another topic, or General) waits until the turn is over."""
    ideas = tg.add_topic(FORUM, "Ideas")
    bot = in_topic(api, FORUM, ideas)
    async with chat_turn(bot, FORUM):
        await bot.send_message(FORUM, Text("first"))
        other = asyncio.create_task(api.send_message(FORUM, Text("to General")))
        await tg.wait_for(lambda: api.queues.waiting(FORUM) == 2)  # the turn's holder, and it
        await bot.send_message(FORUM, Text("second"))
        assert not other.done() and tg.messages_in(FORUM) == []
    await other
    assert [m.text for m in tg.messages(FORUM)] == ["first", "second", "to General"]


async def test_a_topic_bot_sends_to_another_chat_without_the_thread(api: QueuedBot, tg: FakeTelegram) -> None:
    # a handler in a topic may write to an owner's private chat (a pairing request): no thread there
    owner = 4242
    tg.add_chat(owner)
    bot = in_topic(api, FORUM, tg.add_topic(FORUM, "Ideas"))
    await bot.send_message(owner, Text("someone asks to pair"))
    await bot.send_chat_action(owner, "typing")
    assert tg.last_message(owner) is not None and tg.last_message(owner).text == "someone asks to pair"  # type: ignore[union-attr]
    assert [c.thread_id for c in tg.chat_actions if c.chat_id == owner] == [None]
