"""The fake Bot API must answer like Telegram: driven here with the real python-telegram-bot."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession
from hypothesis import given
from hypothesis import strategies as st
from telegram import (
    Bot,
    BotCommandScopeAllGroupChats,
    BotCommandScopeChat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReactionTypeEmoji,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest

from tests.fakes.telegram_html import TelegramHTMLError, parse_html, visible_length
from tests.fakes.telegram_server import FakeTelegram, Fault

USER = 42


@pytest.fixture(autouse=True)
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it PTB 22.8 warns (an error under filterwarnings=error) whenever it builds RetryAfter."""
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as b:
        yield b


def keyboard(*data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(d, callback_data=d) for d in data]])


# ------------------------------------------------------------------------------------------ parse_html
def test_parse_html_nested_tags_and_entities() -> None:
    text = '<b>bold <i>both</i></b> &lt;tag&gt; &amp; &quot;q&quot; &#128512;&#x1F600; <a href="https://x.y/?a=1&amp;b=2">l</a>'
    assert parse_html(text) == 'bold both <tag> & "q" 😀😀 l'


def test_parse_html_pre_code_language_spoiler_blockquote() -> None:
    assert parse_html('<pre><code class="language-python">x = 1</code></pre>') == "x = 1"
    assert parse_html('<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>') == "st"
    assert parse_html("<blockquote expandable>q</blockquote>") == "q"
    assert parse_html('<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>') == "👍"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Hello<div>x</div>", 'Unsupported start tag "div" at byte offset 5'),
        ("é<div>", 'Unsupported start tag "div" at byte offset 2'),  # UTF-8 bytes, not characters
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("fish & chips", "Character entity expected at byte offset 5"),
        ("a&nbsp;b", "Character entity expected at byte offset 1"),
        ("<b>open", 'Can\'t find end tag corresponding to start tag "b"'),
        ("</b>", "Unexpected end tag at byte offset 0"),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ('<span class="x">s</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("<b", "Unclosed start tag at byte offset 0"),
        ("<a>x</a>", 'Tag "a" must have non-empty attribute "href" at byte offset 0'),
    ],
)
def test_parse_html_rejects_like_telegram(text: str, reason: str) -> None:
    with pytest.raises(TelegramHTMLError) as err:
        parse_html(text)
    assert str(err.value) == f"Bad Request: can't parse entities: {reason}"


def test_parse_html_lenient_mode_matches_tdlib() -> None:
    assert parse_html("fish & chips > fries", strict=False) == "fish & chips > fries"


def test_visible_length_counts_utf16_units() -> None:
    assert visible_length("<b>😀</b>&amp;") == 3


@given(st.text())
def test_escaped_text_always_parses_back(text: str) -> None:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert parse_html(f"<b>{escaped}</b>") == text


# ------------------------------------------------------------------------------------------ server
async def test_get_me(bot: Bot, tg: FakeTelegram) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (tg.bot_id, tg.username, True)


async def test_wrong_token_is_unauthorized_everywhere(tg: FakeTelegram) -> None:
    requests = (HTTPXRequest(), HTTPXRequest())
    wrong = Bot("123456:WRONG", base_url=tg.base_url, request=requests[0], get_updates_request=requests[1])
    try:
        with pytest.raises(InvalidToken):
            await wrong.initialize()  # getMe
        with pytest.raises(InvalidToken):
            await wrong.get_updates()
    finally:
        for request in requests:
            await request.shutdown()
    assert [r.status for r in tg.requests] == [401, 401]


async def test_unknown_method_is_404(bot: Bot, tg: FakeTelegram) -> None:
    with pytest.raises(EndPointNotFound):  # PTB's reading of Telegram's 404 "Not Found"
        await bot.do_api_request("noSuchMethod")
    assert (tg.requests[-1].status, tg.requests[-1].description) == (404, "Not Found")


async def test_send_to_unknown_chat_is_chat_not_found(bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.send_message(999, "hi")


async def test_send_edit_and_not_modified(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_message(
        USER, "<b>Hi</b> there", parse_mode=ParseMode.HTML, reply_markup=keyboard("a")
    )
    assert msg.text == "Hi there" and msg.entities[0].type == "bold"
    sent = tg.last_message(USER)
    assert sent is not None and sent.text == "<b>Hi</b> there" and sent.buttons == [[("a", "a")]]

    edited = await bot.edit_message_text("Bye", chat_id=USER, message_id=msg.message_id)
    assert edited.text == "Bye"  # type: ignore[union-attr]
    assert sent.edits == ["<b>Hi</b> there"] and sent.reply_markup is None  # no markup = keyboard removed

    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("Bye", chat_id=USER, message_id=msg.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("x", chat_id=USER, message_id=999)
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_reply_markup(chat_id=USER, message_id=msg.message_id)


async def test_not_modified_compares_rendered_content(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_message(USER, "<b>x</b>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text(
            "<strong>x</strong>", chat_id=USER, message_id=msg.message_id, parse_mode="HTML"
        )


async def test_text_length_is_checked_after_parsing_in_utf16(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    await bot.send_message(USER, "<b>" + "a" * 4096 + "</b>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(USER, "😀" * 2049)  # 2049 characters, 4098 UTF-16 units
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(USER, "<b> </b>", parse_mode=ParseMode.HTML)


async def test_bad_html_is_rejected(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    with pytest.raises(
        BadRequest, match=r"(?i)can't parse entities: Unsupported start tag \"div\" at byte offset 0"
    ):
        await bot.send_message(USER, "<div>x</div>", parse_mode=ParseMode.HTML)
    assert tg.messages(USER) == []


async def test_message_ids_are_shared_between_user_and_bot(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_text(USER, "hello")  # message 1
    msg = await bot.send_message(USER, "hi", reply_to_message_id=1)
    assert msg.message_id == 2 and msg.reply_to_message is not None
    tg.send_text(USER, "again")
    updates = await bot.get_updates()
    assert [u.message.message_id for u in updates if u.message] == [1, 3]


async def test_get_updates_offsets_confirm_forever(bot: Bot, tg: FakeTelegram) -> None:
    first = tg.send_text(USER, "/start")
    second = tg.send_text(USER, "two")
    updates = await bot.get_updates()
    assert [u.update_id for u in updates] == [first, second]
    assert updates[0].message is not None and updates[0].message.entities[0].type == "bot_command"
    assert [u.update_id for u in await bot.get_updates(offset=first + 1)] == [second]
    assert tg.unconfirmed() == [second] and tg.confirmed_offset == first + 1
    assert [u.update_id for u in await bot.get_updates()] == [
        second
    ]  # offset omitted: unconfirmed ones again
    assert await bot.get_updates(offset=second + 1) == ()
    assert tg.unconfirmed() == []


async def test_get_updates_limit(bot: Bot, tg: FakeTelegram) -> None:
    ids = [tg.send_text(USER, str(i)) for i in range(3)]
    assert [u.update_id for u in await bot.get_updates(limit=2)] == ids[:2]


async def test_long_poll_waits_for_an_update(bot: Bot, tg: FakeTelegram) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_for(lambda: len(tg.calls("getUpdates")) == 1)
    await asyncio.sleep(0.05)
    assert not poll.done()
    update_id = tg.send_text(USER, "wake up")
    updates = await asyncio.wait_for(poll, 2)
    assert [u.update_id for u in updates] == [update_id]


async def test_long_poll_times_out_empty(bot: Bot) -> None:
    assert await bot.get_updates(timeout=1) == ()


async def test_second_poller_terminates_the_first(bot: Bot, tg: FakeTelegram) -> None:
    """Two bot instances polling one token: Telegram ends the older long poll with 409."""
    first = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_for(lambda: len(tg.calls("getUpdates")) == 1)
    async with Bot(tg.token, base_url=tg.base_url) as other:
        second = asyncio.create_task(other.get_updates(timeout=10))
        with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates request"):
            await asyncio.wait_for(first, 2)
        tg.send_text(USER, "x")
        assert len(await asyncio.wait_for(second, 2)) == 1


async def test_fail_next_429_raises_retry_after(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter) as err:
        await bot.send_message(USER, "x")
    assert err.value.retry_after == dt.timedelta(seconds=3)
    assert tg.messages(USER) == []
    await bot.send_message(USER, "x")
    assert len(tg.messages(USER)) == 1


async def test_flood_limit_per_chat(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.flood_limit(2)
    await bot.send_message(USER, "1")
    await bot.send_message(USER, "2")
    with pytest.raises(RetryAfter):
        await bot.send_message(USER, "3")


async def test_callback_query_is_answered_once(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_message(USER, "Approve?", reply_markup=keyboard("yes", "no"))
    tg.press_button(USER, msg.message_id, "yes")
    (update,) = await bot.get_updates()
    query = update.callback_query
    assert query is not None and query.data == "yes" and query.message is not None
    assert query.message.message_id == msg.message_id
    with pytest.raises(BadRequest):
        await bot.answer_callback_query(query.id, text="x" * 201)
    assert await bot.answer_callback_query(query.id, text="Approved")
    assert tg.callback_answers[-1].text == "Approved" and tg.unanswered_callbacks() == []
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(query.id)


async def test_pressing_a_missing_button_is_a_test_error(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_message(USER, "Approve?", reply_markup=keyboard("yes"))
    with pytest.raises(AssertionError, match=r"(?i)no button"):
        tg.press_button(USER, msg.message_id, "maybe")


async def test_callback_data_over_64_bytes_is_rejected(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    with pytest.raises(BadRequest, match=r"(?i)BUTTON_DATA_INVALID"):
        await bot.send_message(USER, "x", reply_markup=keyboard("é" * 33))  # 33 chars, 66 bytes
    await bot.send_message(USER, "x", reply_markup=keyboard("é" * 32))


async def test_blocked_user_is_forbidden(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.block(USER)
    with pytest.raises(Forbidden, match=r"(?i)bot was blocked by the user"):
        await bot.send_message(USER, "x")


async def test_document_upload_and_download(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_document(
        USER, b"hello bytes", filename="notes.txt", caption="<i>notes</i>", parse_mode="HTML"
    )
    sent = tg.last_message(USER)
    assert sent is not None and sent.kind == "document"
    assert (sent.document_filename, sent.document_content, sent.caption) == (
        "notes.txt",
        b"hello bytes",
        "<i>notes</i>",
    )
    assert msg.document is not None
    file = await bot.get_file(msg.document.file_id)
    assert bytes(await file.download_as_bytearray()) == b"hello bytes"
    with pytest.raises(BadRequest, match=r"(?i)there is no text in the message to edit"):
        await bot.edit_message_text("x", chat_id=USER, message_id=msg.message_id)


async def test_actions_reactions_commands_drafts_delete(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_text(USER, "hi")
    await bot.send_chat_action(USER, "typing")
    assert [(c.chat_id, c.action) for c in tg.chat_actions] == [(USER, "typing")]
    await bot.set_message_reaction(USER, 1, [ReactionTypeEmoji("👍")])
    assert tg.reactions[(USER, 1)] == [{"type": "emoji", "emoji": "👍"}]
    await bot.set_my_commands([("stop", "Stop the current turn")])
    assert [(c.command, c.description) for c in await bot.get_my_commands()] == [
        ("stop", "Stop the current turn")
    ]
    with pytest.raises(BadRequest, match=r"(?i)BOT_COMMAND_INVALID"):
        await bot.set_my_commands([("Stop", "bad")])
    assert await bot.send_message_draft(USER, 7, "thinking")
    assert tg.drafts[-1].draft_id == 7
    with pytest.raises(BadRequest):
        await bot.send_message_draft(USER, 0, "x")
    msg = await bot.send_message(USER, "temp")
    assert await bot.delete_message(USER, msg.message_id)
    assert tg.messages(USER)[-1].deleted and tg.last_message(USER) is None
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(USER, msg.message_id)


async def test_wait_for_times_out_with_a_dump(tg: FakeTelegram) -> None:
    with pytest.raises(AssertionError, match=r"(?i)recent requests"):
        await tg.wait_for(lambda: False, timeout=0.1)


async def test_raw_form_and_json_bodies(tg: FakeTelegram) -> None:
    """Not only PTB's encoding: JSON bodies and GET query strings work, as with Telegram."""
    import json
    import urllib.parse

    from aiohttp import ClientSession

    tg.add_chat(USER)
    async with ClientSession() as http:
        url = f"{tg.root}/bot{tg.token}/sendMessage"
        async with http.post(url, json={"chat_id": USER, "text": "json"}) as resp:
            assert (await resp.json())["result"]["text"] == "json"
        query = urllib.parse.urlencode({"chat_id": USER, "text": "get"})
        async with http.get(f"{url}?{query}") as resp:
            assert (await resp.json())["ok"] is True
        async with http.post(url, json={"chat_id": USER, "text": "a & b", "parse_mode": "HTML"}) as resp:
            body = json.loads(await resp.text())
            assert resp.status == 400 and body["error_code"] == 400
            assert body["description"].startswith(
                "Bad Request: can't parse entities: Character entity expected"
            )


async def test_application_polling_end_to_end(tg: FakeTelegram) -> None:
    """The real PTB Application (updater, handlers) works against the fake."""
    from telegram.ext import ApplicationBuilder, CallbackQueryHandler, CommandHandler, ContextTypes

    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_chat is not None
        await context.bot.send_message(update.effective_chat.id, "Approve?", reply_markup=keyboard("yes"))

    async def pressed(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.callback_query is not None
        await update.callback_query.answer("ok")
        await update.callback_query.edit_message_text(f"chose {update.callback_query.data}")

    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url).build()
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CallbackQueryHandler(pressed))
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        tg.send_text(USER, "/start")
        await tg.wait_for(lambda: tg.last_message(USER) is not None)
        message = tg.last_message(USER)
        assert message is not None
        tg.press_button_labeled(USER, message.message_id, "yes")
        await tg.wait_for(lambda: message.text == "chose yes")
        assert tg.callback_answers[-1].text == "ok" and message.reply_markup is None
        await app.updater.stop()
        await app.stop()
    assert tg.unconfirmed() == []


# ------------------------------------------------------------------------------------------ faults
async def test_hang_then_504_is_a_network_error_and_nothing_happened(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", status=504, hang=0.3)
    started = time.monotonic()
    with pytest.raises(NetworkError, match=r"^Gateway Timeout$") as err:
        await bot.send_message(USER, "x")
    assert time.monotonic() - started >= 0.3 and not isinstance(err.value, TimedOut)
    assert tg.messages(USER) == []
    (fault,) = tg.injected
    assert (fault.method, fault.source, fault.status, fault.applied, fault.hang) == (
        "sendmessage", "fail_next", 504, False, 0.3,
    )  # fmt: skip
    assert (tg.requests[-1].status, tg.requests[-1].description) == (504, "Gateway Timeout")


async def test_applied_504_delivers_then_fails_so_a_retry_duplicates(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", status=504, hang=0.1, applied=True)
    with pytest.raises(NetworkError, match=r"Gateway Timeout"):
        await bot.send_message(USER, "hello")
    await bot.send_message(USER, "hello")  # the client's retry
    assert [m.text for m in tg.messages(USER)] == ["hello", "hello"]
    assert tg.injected[-1].applied

    msg = tg.messages(USER)[-1]
    tg.fail_next("editMessageText", status=504, hang=0.1, applied=True)
    with pytest.raises(NetworkError):
        await bot.edit_message_text("edited", chat_id=USER, message_id=msg.message_id)
    assert msg.text == "edited"
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):  # the retry sees it done
        await bot.edit_message_text("edited", chat_id=USER, message_id=msg.message_id)


async def test_applied_failure_waits_for_a_call_that_succeeds(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", status=504, applied=True)
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(USER, "<b>", parse_mode=ParseMode.HTML)  # its own error wins
    with pytest.raises(NetworkError, match=r"Gateway Timeout"):
        await bot.send_message(USER, "ok")
    assert [m.text for m in tg.messages(USER)] == ["ok"] and len(tg.injected) == 1


async def test_hang_longer_than_read_timeout_is_timed_out(tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", status=504, hang=0.6, applied=True)
    async with Bot(tg.token, base_url=tg.base_url, request=HTTPXRequest(read_timeout=0.2)) as quick:
        with pytest.raises(TimedOut):
            await quick.send_message(USER, "x")
    assert [m.text for m in tg.messages(USER)] == ["x"]  # delivered all the same
    await tg.wait_for(lambda: tg.requests[-1].status == 504)  # answered into a closed connection


async def test_invalid_json_with_200_is_a_bare_telegram_error(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", invalid_json=True)
    with pytest.raises(TelegramError, match=r"^Invalid server response$") as err:
        await bot.send_message(USER, "x")
    assert not isinstance(err.value, NetworkError)  # `except NetworkError` would miss it
    assert tg.messages(USER) == [] and tg.injected[-1].invalid_json


async def test_html_502_is_a_network_error(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    tg.fail_next("sendMessage", status=502, invalid_json=True)
    with pytest.raises(
        NetworkError, match=r"^Bad Gateway \(502\)\. Parsing the server response b'<html>"
    ) as err:
        await bot.send_message(USER, "x")
    assert type(err.value.__cause__) is TelegramError


async def test_fail_next_200_needs_invalid_json(tg: FakeTelegram) -> None:
    with pytest.raises(ValueError):
        tg.fail_next("sendMessage", status=200)


async def test_fail_next_409_on_get_updates_is_conflict(bot: Bot, tg: FakeTelegram) -> None:
    update_id = tg.send_text(USER, "x")
    tg.fail_next("getUpdates", status=409)
    with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates request"):
        await bot.get_updates()
    assert [u.update_id for u in await bot.get_updates()] == [update_id]


async def test_revoked_token_is_unauthorized_everywhere(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    msg = await bot.send_document(USER, b"data", filename="a.txt")
    assert msg.document is not None
    file = await bot.get_file(msg.document.file_id)
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_for(lambda: len(tg.calls("getUpdates")) == 1)
    tg.revoke_token()
    with pytest.raises(InvalidToken):
        await asyncio.wait_for(poll, 2)  # a long poll in flight ends too
    with pytest.raises(InvalidToken):
        await bot.send_message(USER, "x")
    with pytest.raises(InvalidToken):
        await bot.get_me()
    with pytest.raises(InvalidToken):
        await file.download_as_bytearray()
    assert {r.status for r in tg.requests[-3:]} == {401}


async def chaos_sends(seed: int, kinds: tuple[str, ...], *, hang: float = 0.05) -> tuple[list[str], int, int]:
    """12 sends under chaos: the kinds injected, the sends that succeeded, the messages recorded."""
    async with FakeTelegram() as fake, Bot(fake.token, base_url=fake.base_url) as b:
        fake.add_chat(USER)
        fake.chaos({"sendMessage": 0.5}, kinds=kinds, seed=seed, hang=hang, max_faults=4)
        ok = 0
        for i in range(12):
            try:
                await b.send_message(USER, f"m{i}")
                ok += 1
            except TelegramError:
                pass
        assert all(f.source == "chaos" and f.method == "sendmessage" for f in fake.injected)
        return [str(f.kind) for f in fake.injected], ok, len(fake.messages(USER))


async def test_chaos_is_seeded_bounded_and_before_any_effect() -> None:
    kinds = ("429", "500", "502", "502html", "hang504", "badjson")
    first, ok, recorded = await chaos_sends(3, kinds)
    assert len(first) == 4 and ok == 12 - 4 == recorded  # no fault had an effect; then chaos stopped
    assert set(first) <= set(kinds)
    assert (await chaos_sends(3, kinds))[0] == first
    assert (await chaos_sends(4, kinds))[0] != first


async def test_chaos_applied_504_delivers_what_failed() -> None:
    kinds, ok, recorded = await chaos_sends(1, ("applied504",), hang=0.01)
    assert kinds == ["applied504"] * 4 and ok == 8 and recorded == 12


async def test_chaos_on_get_updates_confirms_nothing_and_chaos_off(bot: Bot, tg: FakeTelegram) -> None:
    first = tg.send_text(USER, "a")
    tg.send_text(USER, "b")
    tg.chaos({"getUpdates": 1.0}, kinds=[Fault.HANG_504], hang=0.05, max_faults=5)
    with pytest.raises(NetworkError, match=r"Gateway Timeout"):
        await bot.get_updates(offset=first + 1)
    assert tg.unconfirmed() == [first, first + 1]  # the offset never reached Telegram
    tg.chaos_off()
    assert [u.update_id for u in await bot.get_updates(offset=first + 1)] == [first + 1]
    with pytest.raises(ValueError):
        tg.chaos({"sendMessage": 0.5}, kinds=("teapot",))
    with pytest.raises(ValueError):
        tg.chaos({"sendMessage": 1.5})


# ------------------------------------------------------------------------------------------ odd updates
async def test_raw_update_of_any_shape_survives_the_allowed_updates_filter(
    bot: Bot, tg: FakeTelegram
) -> None:
    empty = tg.send_raw_update({"update_id": 5})  # no type at all; its own update_id is replaced
    future = tg.send_unknown_update()
    (first, second) = await bot.get_updates()  # default allowed_updates: a newer API's types come
    assert (first.update_id, second.update_id) == (empty, future)
    assert second.message is None and second.effective_message is None
    assert second.api_kwargs == {"future_update": {"id": 1, "note": "from the future"}}


async def test_unknown_update_needs_force_under_explicit_allowed_updates(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_unknown_update()
    forced = tg.send_unknown_update("future_update", {"x": 1}, force=True)
    text = tg.send_text(USER, "hi")
    updates = await bot.get_updates(allowed_updates=["message"])
    assert [u.update_id for u in updates] == [forced, text]
    await bot.get_updates(offset=text + 1)
    assert tg.unconfirmed() == []


async def test_poll_missing_allows_revoting_breaks_ptb(bot: Bot, tg: FakeTelegram) -> None:
    good = tg.send_poll(USER)
    assert Update.de_json(tg.pending_update(good), bot).message.poll.allows_revoting  # type: ignore[union-attr]
    bad = tg.send_poll_missing_allows_revoting(USER)
    assert "allows_revoting" not in tg.pending_update(bad)["message"]["poll"]
    with pytest.raises(TypeError, match=r"allows_revoting"):
        Update.de_json(tg.pending_update(bad), bot)
    with pytest.raises(TypeError, match=r"allows_revoting"):
        await bot.get_updates()  # one bad update fails the whole batch


async def test_message_with_bad_chat_breaks_ptb(bot: Bot, tg: FakeTelegram) -> None:
    update_id = tg.send_message_with_bad_chat(USER)
    payload = tg.pending_update(update_id)
    assert payload["message"]["chat"] == "not-a-chat"
    with pytest.raises(TypeError):
        Update.de_json(payload, bot)
    assert tg.send_text(USER, "after") == update_id + 1  # the fake's own record is intact


async def test_callback_with_broken_message_breaks_ptb(bot: Bot, tg: FakeTelegram) -> None:
    update_id = tg.press_button_with_broken_message(USER, "yes")
    payload = tg.pending_update(update_id)
    with pytest.raises(AttributeError):
        Update.de_json(payload, bot)
    assert await bot.answer_callback_query(payload["callback_query"]["id"])  # the query is real
    assert tg.unanswered_callbacks() == []


# ------------------------------------------------------------------------------------------ groups and topics
GROUP = -1001234567890
FORUM = -1009876543210


async def test_group_message_carries_the_group_and_its_sender(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(GROUP, title="Team")
    tg.add_group(-4242, title="Old crew", supergroup=False)
    tg.send_text(USER, "hello team", chat_id=GROUP)
    tg.send_text(USER + 1, "hi", chat_id=-4242)
    first, second = (u.message for u in await bot.get_updates())
    assert first is not None and second is not None
    assert (first.chat.id, first.chat.type, first.chat.title, first.chat.is_forum) == (
        GROUP, "supergroup", "Team", None,
    )  # fmt: skip
    assert first.from_user is not None and first.from_user.id == USER
    assert (second.chat.type, second.chat.title, second.from_user.id) == ("group", "Old crew", USER + 1)  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        tg.add_group(-4242, title="x")  # a supergroup id has 13 digits after its minus
    with pytest.raises(ValueError):
        tg.add_group(-4243, title="x", supergroup=False, forum=True)
    with pytest.raises(ValueError):
        tg.send_text(USER, "x", chat_id=-555)  # neither the user's own chat nor a known group


async def test_mentions_and_addressed_commands_in_utf16(tg: FakeTelegram) -> None:
    async with FakeTelegram(first_name="Bot 🤖") as fake, Bot(fake.token, base_url=fake.base_url) as b:
        fake.add_group(GROUP, title="Team")
        fake.send_text(USER, "what now? 😀", chat_id=GROUP, mention=True)
        fake.send_text(USER, "/stop", chat_id=GROUP, mention_user=True)
        fake.send_text(USER, f"/stop@{fake.username} now", chat_id=GROUP)
        mentioned, named, command = (u.message for u in await b.get_updates())
    assert mentioned is not None and mentioned.text == f"@{fake.username} what now? 😀"
    assert [(e.type, t) for e, t in mentioned.parse_entities().items()] == [("mention", f"@{fake.username}")]
    assert named is not None and named.text == "Bot 🤖 /stop"
    (mention, cmd) = named.entities
    assert (mention.type, mention.offset, mention.length) == ("text_mention", 0, 6)  # 🤖 is 2 units
    assert mention.user is not None and mention.user.id == fake.bot_id and mention.user.is_bot
    assert (cmd.type, cmd.offset, cmd.length) == ("bot_command", 7, 5)  # not at 0: no command for PTB
    assert command is not None and command.entities[0].type == "bot_command"
    assert command.parse_entity(command.entities[0]) == f"/stop@{fake.username}"
    with pytest.raises(ValueError):
        tg.send_text(USER, "x", mention=True, mention_user=True)


async def test_reply_to_the_bot_carries_the_bot_as_from(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(GROUP, title="Team")
    tg.send_text(USER, "question", chat_id=GROUP)  # 1
    answer = await bot.send_message(GROUP, "answer", reply_to_message_id=1)  # 2, a reply itself
    tg.send_text(USER + 1, "thanks", chat_id=GROUP, reply_to_message_id=answer.message_id)
    reply = (await bot.get_updates())[-1].message
    assert reply is not None and reply.reply_to_message is not None
    replied = reply.reply_to_message
    assert replied.from_user is not None and replied.from_user.id == tg.bot_id and replied.from_user.is_bot
    assert replied.text == "answer" and replied.reply_to_message is None  # Telegram nests no deeper


async def test_forum_topics_carry_their_thread(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(FORUM, title="Forum", forum=True)
    ideas = tg.add_topic(FORUM, "Ideas")  # opened by the bot, as with createForumTopic
    assert ideas != 1 and tg.topic(FORUM, ideas).creator_id == tg.bot_id
    tg.send_text(USER, "in the topic", chat_id=FORUM, thread_id=ideas)
    tg.send_text(USER, "in General", chat_id=FORUM)
    topical, general = (u.message for u in await bot.get_updates())
    assert topical is not None and topical.chat.is_forum
    assert (topical.message_thread_id, topical.is_topic_message) == (ideas, True)
    root = topical.reply_to_message  # every topic message "replies" to the topic's creation
    assert root is not None and root.message_id == ideas and root.forum_topic_created is not None
    assert root.forum_topic_created.name == "Ideas" and root.from_user.id == tg.bot_id  # type: ignore[union-attr]
    assert general is not None and general.message_thread_id is None and not general.is_topic_message

    sent = await bot.send_message(FORUM, "answer", message_thread_id=ideas)
    assert (sent.message_thread_id, sent.is_topic_message) == (ideas, True)
    by_reply = await bot.send_message(FORUM, "also", reply_to_message_id=topical.message_id)
    assert by_reply.message_thread_id == ideas  # a reply lands in the topic of what it replies to
    await bot.send_document(FORUM, b"notes", filename="n.txt", message_thread_id=ideas)
    await bot.send_message(FORUM, "to General")
    await bot.send_chat_action(FORUM, "typing", message_thread_id=ideas)
    await bot.send_chat_action(FORUM, "typing", message_thread_id=1)  # actions may name General
    assert [m.visible_text for m in tg.messages_in(FORUM, ideas)] == ["answer", "also", ""]
    assert [m.text for m in tg.messages_in(FORUM)] == ["to General"]
    assert [c.thread_id for c in tg.chat_actions] == [ideas, None]
    for thread in (1, 999):  # General takes no thread id in sends; 999 never existed
        with pytest.raises(BadRequest, match=r"^Message thread not found$"):
            await bot.send_message(FORUM, "x", message_thread_id=thread)
    tg.add_group(GROUP, title="Plain")
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.send_photo(GROUP, b"\x89PNG", message_thread_id=ideas)
    with pytest.raises(AssertionError):
        tg.send_text(USER, "x", chat_id=FORUM, thread_id=999)


async def test_topics_created_closed_and_deleted_by_the_api(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(FORUM, title="Forum", forum=True)
    tg.add_group(GROUP, title="Plain")
    with pytest.raises(BadRequest, match=r"(?i)the chat is not a forum"):
        await bot.create_forum_topic(GROUP, "x")
    topic = await bot.create_forum_topic(FORUM, "Bugs")
    thread = topic.message_thread_id
    assert (topic.name, tg.topic(FORUM, thread).name) == ("Bugs", "Bugs")
    first = await bot.send_message(FORUM, "first", message_thread_id=thread)
    tg.send_text(USER, "user's", chat_id=FORUM, thread_id=thread)

    assert await bot.close_forum_topic(FORUM, thread)
    with pytest.raises(BadRequest, match=r"^Topic_closed$"):  # PTB capitalizes the description
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    with pytest.raises(BadRequest, match=r"(?i)topic_closed"):
        await bot.send_chat_action(FORUM, "typing", message_thread_id=thread)
    with pytest.raises(BadRequest, match=r"(?i)topic_not_modified"):
        await bot.close_forum_topic(FORUM, thread)
    with pytest.raises(AssertionError, match=r"closed topic"):
        tg.send_text(USER, "x", chat_id=FORUM, thread_id=thread)
    assert tg.requests[-1].description == "Bad Request: TOPIC_NOT_MODIFIED"
    assert await bot.reopen_forum_topic(FORUM, thread)
    await bot.send_message(FORUM, "again", message_thread_id=thread)

    assert await bot.delete_forum_topic(FORUM, thread)
    assert tg.message(FORUM, first.message_id).deleted  # the topic took its messages along
    assert all(m.deleted for m in tg.messages_in(FORUM, thread))
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.delete_forum_topic(FORUM, thread)


async def test_topic_controls_close_and_delete(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(FORUM, title="Forum", forum=True)
    thread = tg.add_topic(FORUM, "Chat", creator=USER)
    tg.send_text(USER, "hello", chat_id=FORUM, thread_id=thread)
    (update,) = await bot.get_updates()
    assert update.message is not None and update.message.reply_to_message is not None
    assert update.message.reply_to_message.from_user.id == USER  # type: ignore[union-attr]
    tg.close_topic(FORUM, thread)
    with pytest.raises(BadRequest, match=r"(?i)topic_closed"):
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    tg.reopen_topic(FORUM, thread)
    sent = await bot.send_message(FORUM, "ok", message_thread_id=thread)
    tg.delete_topic(FORUM, thread)
    assert tg.message(FORUM, sent.message_id).deleted and tg.topic(FORUM, thread).deleted
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    with pytest.raises(AssertionError):
        tg.close_topic(FORUM, thread)


async def test_drafts_are_refused_outside_private_chats(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(GROUP, title="Team")
    with pytest.raises(BadRequest, match=r"(?i)textdraft_peer_invalid"):
        await bot.send_message_draft(GROUP, 7, "thinking")
    assert tg.drafts == []
    assert (tg.requests[-1].method, tg.requests[-1].status) == ("sendMessageDraft", 400)
    assert tg.requests[-1].description == "Bad Request: TEXTDRAFT_PEER_INVALID"
    tg.add_chat(USER)
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.send_message_draft(USER, 7, "thinking", message_thread_id=5)
    assert await bot.send_message_draft(USER, 7, "thinking")


async def test_flood_per_group(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(GROUP, title="Team")
    tg.add_chat(USER)
    tg.flood_per_group(3)
    first = await bot.send_message(GROUP, "1")
    await bot.send_message(GROUP, "2")
    await bot.edit_message_text("1 edited", chat_id=GROUP, message_id=first.message_id)  # edits count
    with pytest.raises(RetryAfter) as err:
        await bot.send_message(GROUP, "4")
    assert dt.timedelta(seconds=58) <= err.value.retry_after <= dt.timedelta(seconds=60)  # type: ignore[operator]
    for i in range(5):
        await bot.send_message(USER, str(i))  # private chats are not groups
    tg.flood_per_group(None)
    await bot.send_message(GROUP, "4")
    assert [m.text for m in tg.messages(GROUP)] == ["1 edited", "2", "4"]


async def test_set_my_commands_keeps_its_scope(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_group(GROUP, title="Team")
    await bot.set_my_commands([("stop", "Stop")], scope=BotCommandScopeAllGroupChats())
    await bot.set_my_commands([("help", "Help")], scope=BotCommandScopeChat(GROUP), language_code="ru")
    await bot.set_my_commands([("start", "Start")])
    (groups,) = tg.commands_for("all_group_chats")
    assert groups.scope == {"type": "all_group_chats"} and groups.commands == [("stop", "Stop")]
    (chat,) = tg.commands_for("chat")
    assert (chat.scope, chat.language_code) == ({"type": "chat", "chat_id": GROUP}, "ru")
    assert tg.my_commands("all_group_chats") == [("stop", "Stop")] and tg.my_commands() == [
        ("start", "Start")
    ]
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.set_my_commands([("stop", "Stop")], scope=BotCommandScopeChat(-1005550000000))
    async with ClientSession() as http:
        body = {"commands": [], "scope": {"type": "everyone"}}
        async with http.post(f"{tg.root}/bot{tg.token}/setMyCommands", json=body) as resp:
            assert resp.status == 400
            assert (await resp.json())[
                "description"
            ] == "Bad Request: can't parse BotCommandScope JSON object"
    assert len(tg.commands) == 3
