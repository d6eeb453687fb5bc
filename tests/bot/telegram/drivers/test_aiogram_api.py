"""The aiogram driver against the fake Bot API: every call, every error, the limiter, the count.

Real aiogram over real HTTP to :class:`~tests.fakes.telegram_server.FakeTelegram`; the parse
tests hold aiogram's reading of an update to python-telegram-bot's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import telegram
from aiohttp import web

from agentgram.bot.telegram.core import incoming
from agentgram.bot.telegram.core.port import (
    HTML,
    BadRequest,
    BotCommand,
    ChatMigrated,
    Conflict,
    FileUpload,
    Forbidden,
    InvalidToken,
    Keyboard,
    KeyButton,
    NetworkError,
    RetryAfter,
    Text,
    TimedOut,
)
from agentgram.bot.telegram.drivers.aiogram import AiogramApi, parse_update
from tests.fakes.loopback import LoopbackServer
from tests.fakes.telegram_server import FakeTelegram

USER = 42
GROUP = -100123
OTHER = 43


@pytest.fixture(autouse=True)
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB 22.8 warns (an error here) when it reads a duration without it (the parse tests)."""
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


class Counts(list[tuple[str, str]]):
    """What the ``count`` hook saw: ``(method, result)`` pairs, in order."""

    def __call__(self, method: str, result: str) -> None:
        self.append((method, result))

    def of(self, method: str) -> list[str]:
        return [result for name, result in self if name == method]


@asynccontextmanager
async def driver(
    tg: FakeTelegram, *, root: str | None = None, messages_per_second: float = 30
) -> AsyncIterator[AiogramApi]:
    api = AiogramApi(tg.token, root or tg.root, messages_per_second=messages_per_second)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        fake.add_chat(USER)
        fake.add_chat(OTHER)
        yield fake


@pytest.fixture
async def counts() -> Counts:
    return Counts()


@pytest.fixture
async def api(tg: FakeTelegram, counts: Counts) -> AsyncIterator[AiogramApi]:
    api = AiogramApi(tg.token, tg.root, messages_per_second=30, count=counts)
    try:
        yield api
    finally:
        await api.close()


# --- every call round-trips ---------------------------------------------------------------


async def test_get_me_gives_the_identity_and_remembers_it(api: AiogramApi, tg: FakeTelegram) -> None:
    assert (api.id, api.username) == (None, None)
    me = await api.get_me()
    assert (me.id, me.username, me.first_name) == (tg.bot_id, tg.username, tg.first_name)
    assert (api.id, api.username) == (tg.bot_id, tg.username)


async def test_send_message_with_html_and_keyboard(api: AiogramApi, tg: FakeTelegram) -> None:
    keyboard = Keyboard([[KeyButton("Yes", "y"), KeyButton("No", "n")], [KeyButton("Later", "l")]])
    sent = await api.send_message(USER, Text("<b>hi</b> there", parse_mode=HTML, reply_markup=keyboard))
    message = tg.message(USER, sent.message_id)
    assert (sent.chat_id, message.visible_text, message.parse_mode) == (USER, "hi there", HTML)
    assert message.buttons == [[("Yes", "y"), ("No", "n")], [("Later", "l")]]
    assert not message.disable_notification


async def test_send_message_quietly_as_a_reply(api: AiogramApi, tg: FakeTelegram) -> None:
    first = await api.send_message(USER, Text("first"))
    reply = await api.send_message(
        USER, Text("second", disable_notification=True, reply_to_message_id=first.message_id)
    )
    message = tg.message(USER, reply.message_id)
    assert (message.reply_to_message_id, message.disable_notification) == (first.message_id, True)


async def test_a_reply_to_a_missing_message_is_sent_without_the_reply(
    api: AiogramApi, tg: FakeTelegram
) -> None:
    sent = await api.send_message(USER, Text("still here", reply_to_message_id=999))
    message = tg.message(USER, sent.message_id)
    assert (message.visible_text, message.reply_to_message_id) == ("still here", None)


async def test_edit_text_and_markup_then_delete(api: AiogramApi, tg: FakeTelegram) -> None:
    sent = await api.send_message(USER, Text("draft", reply_markup=Keyboard([[KeyButton("Stop", "s")]])))
    await api.edit_message_text(USER, sent.message_id, Text("<i>final</i>", parse_mode=HTML))
    message = tg.message(USER, sent.message_id)
    assert (message.visible_text, message.edits, message.buttons) == ("final", ["draft"], [])
    await api.edit_message_reply_markup(USER, sent.message_id, Keyboard([[KeyButton("Again", "a")]]))
    assert message.buttons == [[("Again", "a")]]
    await api.edit_message_reply_markup(USER, sent.message_id, None)
    assert message.buttons == []
    await api.delete_message(USER, sent.message_id)
    assert message.deleted


async def test_draft_chat_action_and_reaction(api: AiogramApi, tg: FakeTelegram) -> None:
    await api.send_message_draft(USER, 7, "<b>thinking</b>", parse_mode=HTML, read_timeout=2)
    assert [(d.draft_id, d.visible_text, d.parse_mode) for d in tg.drafts] == [(7, "thinking", HTML)]
    await api.send_chat_action(USER, "upload_document")
    assert tg.actions(USER) == ["upload_document"]
    tg.send_text(USER, "hello")
    await api.set_message_reaction(USER, 1, "👀")
    assert tg.reactions[(USER, 1)] == [{"type": "emoji", "emoji": "👀"}]
    await api.set_message_reaction(USER, 1, None)
    assert tg.reactions[(USER, 1)] == []


async def test_answer_callback_query(api: AiogramApi, tg: FakeTelegram) -> None:
    sent = await api.send_message(USER, Text("pick", reply_markup=Keyboard([[KeyButton("A", "a")]])))
    update_id = tg.press_button(USER, sent.message_id, "a")
    query_id = tg.pending_update(update_id)["callback_query"]["id"]
    await api.answer_callback_query(query_id, text="Done", show_alert=True)
    answer = tg.callback_answers[-1]
    assert (answer.callback_query_id, answer.text, answer.show_alert) == (query_id, "Done", True)


async def test_upload_a_document_and_a_photo(api: AiogramApi, tg: FakeTelegram) -> None:
    report = FileUpload(b"%PDF-1", "report.pdf", caption="<b>Report</b>", parse_mode=HTML, write_timeout=5)
    document = await api.send_file(USER, report)
    chart = FileUpload(b"\x89PNG", "chart.png", as_photo=True, reply_to_message_id=document.message_id)
    photo = await api.send_file(USER, chart)
    first, second = tg.files_sent(USER)
    assert (first.message_id, first.kind, first.document_filename, first.document_content) == (
        document.message_id, "document", "report.pdf", b"%PDF-1",
    )  # fmt: skip
    assert first.visible_text == "Report"
    assert (second.message_id, second.kind, second.document_content) == (
        photo.message_id,
        "photo",
        b"\x89PNG",
    )
    assert second.reply_to_message_id == document.message_id


async def test_download_fetches_the_file_to_dest(api: AiogramApi, tg: FakeTelegram, tmp_path: Path) -> None:
    file_id, _ = tg.add_file(b"the bytes", name="notes.txt")
    dest = tmp_path / "notes.txt"
    await api.download(file_id, dest, read_timeout=5)
    assert dest.read_bytes() == b"the bytes"
    assert tg.downloaded(file_id) == 1


async def test_download_of_a_file_too_big_is_a_bad_request(
    api: AiogramApi, tg: FakeTelegram, tmp_path: Path
) -> None:
    file_id, _ = tg.add_file(b"x", size=25 * 1024 * 1024)
    with pytest.raises(BadRequest, match="File is too big"):
        await api.download(file_id, tmp_path / "big", read_timeout=5)


async def test_set_my_commands_and_delete_webhook(api: AiogramApi, tg: FakeTelegram) -> None:
    commands = [BotCommand("start", "Start"), BotCommand("stop", "Stop the turn")]
    await api.set_my_commands(commands)
    await api.set_my_commands([BotCommand("start", "Начать")], language_code="ru")
    assert tg.my_commands() == [("start", "Start"), ("stop", "Stop the turn")]
    assert tg.my_commands(language_code="ru") == [("start", "Начать")]
    tg.webhook_url = "https://example.invalid/hook"
    await api.delete_webhook()
    assert tg.webhook_url == ""


async def test_get_updates_raw_gives_the_json_as_telegram_sent_it(api: AiogramApi, tg: FakeTelegram) -> None:
    text = tg.send_text(USER, "/start")
    odd = tg.send_raw_update({"message": {**tg.pending_update(text)["message"], "from_the_future": {"x": 1}}})
    unknown = tg.send_unknown_update(force=True)
    expected = [tg.pending_update(update_id) for update_id in (text, odd, unknown)]
    assert await api.get_updates_raw(0, 0, 5) == expected
    assert await api.get_updates_raw(unknown + 1, 0, 5) == []
    assert tg.unconfirmed() == []
    assert (
        tg.calls("getUpdates")[0].params["allowed_updates"]
        == '["message", "edited_message", "callback_query"]'
    )


async def test_get_updates_raw_long_polls_until_an_update_comes(api: AiogramApi, tg: FakeTelegram) -> None:
    poll = asyncio.create_task(api.get_updates_raw(0, 10, 5))
    await tg.wait_for(lambda: len(tg.calls("getUpdates")) == 1)
    update_id = tg.send_text(USER, "late")
    assert [u["update_id"] for u in await poll] == [update_id]


# --- aiogram's errors as the port's -------------------------------------------------------


async def test_errors_are_mapped(api: AiogramApi, tg: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match=r"^Can't parse entities"):
        await api.send_message(USER, Text("<b>open", parse_mode=HTML))
    tg.block(USER)
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await api.send_message(USER, Text("hi"))
    tg.fail_next("getUpdates", status=409)
    with pytest.raises(Conflict, match=r"^Conflict: terminated by other getUpdates request"):
        await api.get_updates_raw(0, 0, 5)
    tg.fail_next("sendChatAction", status=500)
    with pytest.raises(NetworkError, match=r"^Internal Server Error$") as server_error:
        await api.send_chat_action(OTHER, "typing")
    assert not isinstance(server_error.value, TimedOut)
    tg.fail_next("getMe", invalid_json=True)
    with pytest.raises(NetworkError, match=r"^Invalid server response"):
        await api.get_me()


class Answering(LoopbackServer):
    """A Bot API server that answers every call with ``body`` (what the fake Bot API cannot be
    told to say: a ``migrate_to_chat_id``, a result of the wrong shape)."""

    def __init__(self, body: dict[str, Any], status: int = 200) -> None:
        self.body, self.status = body, status

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.Response:
        return web.json_response(self.body, status=self.status)


async def test_a_migrated_group_is_chat_migrated(tg: FakeTelegram) -> None:
    body = {
        "ok": False, "error_code": 400, "description": "Bad Request: group chat was upgraded to a supergroup chat",
        "parameters": {"migrate_to_chat_id": -1001234},
    }  # fmt: skip
    async with Answering(body, 400) as server, driver(tg, root=f"http://127.0.0.1:{server.port}") as api:
        with pytest.raises(ChatMigrated, match=r"^Group chat was upgraded") as error:
            await api.send_message(-1234, Text("hi"))
    assert error.value.new_chat_id == -1001234


async def test_get_updates_raw_that_is_not_a_list_is_a_network_error(tg: FakeTelegram) -> None:
    async with (
        Answering({"ok": True, "result": {"update_id": 1}}) as server,
        driver(tg, root=f"http://127.0.0.1:{server.port}") as api,
    ):
        with pytest.raises(NetworkError, match=r"^Invalid server response"):
            await api.get_updates_raw(0, 0, 5)


async def test_unknown_method_and_revoked_token_are_invalid_token(api: AiogramApi, tg: FakeTelegram) -> None:
    tg.refuse_drafts()  # a server before Bot API 9.3 answers 404
    with pytest.raises(InvalidToken, match="Not Found"):
        await api.send_message_draft(USER, 1, "x", parse_mode=None, read_timeout=2)
    tg.revoke_token()
    with pytest.raises(InvalidToken, match="Unauthorized"):
        await api.get_me()


def test_a_malformed_token_is_invalid_token() -> None:
    with pytest.raises(InvalidToken, match="Token is invalid"):
        AiogramApi("not a token", "http://127.0.0.1:1", messages_per_second=30)


async def test_a_hang_ends_in_timed_out(api: AiogramApi, tg: FakeTelegram) -> None:
    tg.fail_next("sendMessageDraft", status=504, hang=5.0)
    started = time.monotonic()
    with pytest.raises(TimedOut):
        await api.send_message_draft(USER, 1, "x", parse_mode=None, read_timeout=1)
    assert time.monotonic() - started < 3


async def test_no_server_is_a_network_error(tg: FakeTelegram) -> None:
    async with FakeTelegram() as gone:
        root = gone.root
    async with driver(tg, root=root) as api:
        with pytest.raises(NetworkError) as error:
            await api.get_me()
    assert not isinstance(error.value, TimedOut)


async def test_a_429_is_raised_at_once_for_the_chat_queue_to_retry(
    api: AiogramApi, tg: FakeTelegram, counts: Counts
) -> None:
    """The driver only paces: the chat queue (core/chat_queue.py) owns the retry and the pause."""
    tg.fail_next("sendMessage", retry_after=1)
    with pytest.raises(RetryAfter, match=r"^Too Many Requests: retry after 1$") as error:
        await api.send_message(USER, Text("x"))
    assert error.value.retry_after == 1.0
    assert len(tg.calls("sendMessage")) == 1
    assert counts.of("sendMessage") == ["429"]


async def test_a_draft_is_never_retried(api: AiogramApi, tg: FakeTelegram) -> None:
    tg.fail_next("sendMessageDraft", retry_after=5)
    with pytest.raises(RetryAfter):
        await api.send_message_draft(USER, 1, "x", parse_mode=None, read_timeout=2)
    assert len(tg.calls("sendMessageDraft")) == 1


async def test_after_a_429_the_driver_holds_nothing_back(api: AiogramApi, tg: FakeTelegram) -> None:
    """Pausing after a 429 is the chat queue's (per chat, or every chat without one)."""
    tg.fail_next("sendMessage", retry_after=5)
    with pytest.raises(RetryAfter):
        await api.send_message(USER, Text("x"))
    started = time.time()
    await api.send_chat_action(OTHER, "typing")
    await api.send_message(OTHER, Text("y"))
    assert time.time() - started < 1.0


# --- the rate limit -----------------------------------------------------------------------


async def test_a_private_chat_has_only_the_overall_budget_and_chat_actions_skip_it(
    tg: FakeTelegram,
) -> None:
    """As python-telegram-bot's limiter: no limit per private chat beyond the overall one."""
    async with driver(tg, messages_per_second=2) as api:
        started = time.time()
        burst = [asyncio.create_task(api.send_message(USER, Text(f"m{i}"))) for i in range(5)]
        await tg.wait_for(lambda: len(tg.calls("sendMessage")) >= 1)
        await asyncio.gather(*(api.send_chat_action(USER, "typing") for _ in range(5)))
        actions_done = time.time()
        await asyncio.gather(*burst)
        times = [call.time for call in tg.calls("sendMessage")]
        assert times[0] - started < 0.5 and actions_done - started < 0.5  # not held behind the burst
        assert times[-1] - started >= 1.0  # 5 messages at 2 a second


async def test_a_group_gets_twenty_messages_a_minute_and_other_chats_go_on(tg: FakeTelegram) -> None:
    tg.add_chat(GROUP, chat_type="group", title="team")
    async with driver(tg) as api:
        started = time.time()
        burst = [asyncio.create_task(api.send_message(GROUP, Text(f"g{i}"))) for i in range(21)]
        await tg.wait_for(lambda: len(tg.calls("sendMessage")) >= 20)
        await api.send_message(USER, Text("hi"))  # another chat is not held behind the group
        private = time.time() - started
        await asyncio.gather(*burst)
        last = tg.calls("sendMessage")[-1].time - started
        assert private < 1.0
        assert last >= 2.5  # the 21st waits for the group's budget (20 a minute: one more every 3 s)


# --- the count hook -----------------------------------------------------------------------


async def test_count_sees_each_request_once_with_its_result(
    api: AiogramApi, tg: FakeTelegram, counts: Counts, tmp_path: Path
) -> None:
    await api.get_me()
    tg.fail_next("sendChatAction", status=500)
    with pytest.raises(NetworkError):
        await api.send_chat_action(USER, "typing")
    with pytest.raises(BadRequest):
        await api.send_message(USER, Text("<b>", parse_mode=HTML))
    tg.fail_next("sendMessageDraft", status=504, hang=5.0)
    with pytest.raises(TimedOut):
        await api.send_message_draft(USER, 1, "x", parse_mode=None, read_timeout=1)
    file_id, _ = tg.add_file(b"abc")
    await api.download(file_id, tmp_path / "f", read_timeout=5)
    assert counts == [
        ("getMe", "ok"),
        ("sendChatAction", "5xx"),
        ("sendMessage", "4xx"),
        ("sendMessageDraft", "timeout"),
        ("getFile", "ok"),
        ("file", "ok"),
    ]


async def test_count_calls_a_refused_connection_an_error(tg: FakeTelegram) -> None:
    async with FakeTelegram() as gone:
        root = gone.root
    counts = Counts()
    api = AiogramApi(tg.token, root, messages_per_second=30, count=counts)
    try:
        with pytest.raises(NetworkError):
            await api.get_me()
    finally:
        await api.close()
    assert counts == [("getMe", "error")]


# --- parse_update reads an update as python-telegram-bot does -----------------------------


def _ptb(raw: dict[str, Any], api: AiogramApi) -> incoming.Update:
    return incoming.from_library(telegram.Update.de_json(raw, None), api)


def _message_id(tg: FakeTelegram, update_id: int) -> int:
    message_id: int = tg.pending_update(update_id)["message"]["message_id"]
    return message_id


def _reply(tg: FakeTelegram) -> int:
    return tg.send_text(USER, "and this", reply_to_message_id=_message_id(tg, tg.send_text(USER, "first")))


def _edited(tg: FakeTelegram) -> int:
    return tg.send_edited_text(USER, _message_id(tg, tg.send_text(USER, "tpyo")), "typo")


def _callback(
    tg: FakeTelegram, *, message: dict[str, Any] | None = None, inaccessible: bool = False
) -> dict[str, Any]:
    query: dict[str, Any] = {
        "id": "4382bfdwdsb323b2d9", "from": {"id": USER, "is_bot": False, "first_name": "Ann", "username": "ann"},
        "chat_instance": "295", "data": "ap:1:yes",
    }  # fmt: skip
    if message is not None:
        query["message"] = message["message"]
    elif inaccessible:
        query["message"] = {
            "chat": {"id": USER, "type": "private", "first_name": "Ann"},
            "message_id": 3,
            "date": 0,
        }
    else:
        query["inline_message_id"] = "AgAAAN1"
    return {"callback_query": query}


RAW_UPDATES: dict[str, Callable[[FakeTelegram], int]] = {
    "command": lambda tg: tg.send_text(USER, "/cron kill 3"),
    "group command to another bot": lambda tg: tg.send_text(
        USER, "/start@other_bot", chat_id=-100200, chat_type="supergroup"
    ),
    "reply": _reply,
    "album item": lambda tg: tg.send_photo(USER, caption="two of them", media_group_id="album-1"),
    "voice": lambda tg: tg.send_voice(USER, duration=4, transcript="hello"),
    "document": lambda tg: tg.send_user_document(
        USER, "a.pdf", b"%PDF", mime_type="application/pdf", caption="c"
    ),
    "audio": lambda tg: tg.send_audio(USER),
    "video note": lambda tg: tg.send_video_note(USER),
    "animation": lambda tg: tg.send_animation(USER),
    "sticker": lambda tg: tg.send_sticker(USER),
    "edited": _edited,
    "callback with message": lambda tg: tg.send_update(
        _callback(tg, message=tg.pending_update(tg.send_text(USER, "question")))
    ),
    "callback with inaccessible message": lambda tg: tg.send_update(_callback(tg, inaccessible=True)),
    "callback without message": lambda tg: tg.send_update(_callback(tg)),
    "my_chat_member": lambda tg: tg.send_update(
        {
            "my_chat_member": {
                "chat": {"id": USER, "type": "private", "first_name": "Ann"},
                "from": {"id": USER, "is_bot": False, "first_name": "Ann"},
                "date": 1700000000,
                "old_chat_member": {"status": "member", "user": tg.bot_user},
                "new_chat_member": {"status": "kicked", "user": tg.bot_user, "until_date": 0},
            }
        }
    ),
    "unknown kind": lambda tg: tg.send_unknown_update(force=True),
}


@pytest.mark.parametrize("kind", list(RAW_UPDATES))
async def test_parse_update_reads_as_python_telegram_bot_does(
    kind: str, api: AiogramApi, tg: FakeTelegram
) -> None:
    raw = tg.pending_update(RAW_UPDATES[kind](tg))
    parsed = parse_update(raw, api)
    assert parsed == _ptb(raw, api)
    assert parsed.update_id == raw["update_id"]
    assert parsed.get_bot() is api


async def test_parse_update_keeps_what_handlers_read(api: AiogramApi, tg: FakeTelegram) -> None:
    command = parse_update(tg.pending_update(tg.send_text(USER, "/cron kill 3")), api)
    assert command.message is not None
    assert (command.message.command, command.message.args) == ("cron", ["kill", "3"])
    voice = parse_update(tg.pending_update(tg.send_voice(USER, duration=4)), api)
    assert voice.message is not None and voice.message.voice is not None
    assert voice.message.voice.duration == 4
    query = parse_update(tg.pending_update(tg.send_update(_callback(tg, inaccessible=True))), api)
    assert query.callback_query is not None
    assert (query.callback_query.data, query.callback_query.message) == ("ap:1:yes", None)
    member = parse_update(tg.pending_update(RAW_UPDATES["my_chat_member"](tg)), api)
    assert (member.effective_message, member.effective_user, member.effective_chat) == (
        None, incoming.User(USER, first_name="Ann"), incoming.Chat(USER),
    )  # fmt: skip


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda tg: tg.send_message_with_bad_chat(USER), id="chat not an object"),
        pytest.param(
            lambda tg: tg.press_button_with_broken_message(USER), id="callback message not an object"
        ),
    ],
)
async def test_parse_update_raises_for_what_aiogram_cannot_read(
    broken: Callable[[FakeTelegram], int], api: AiogramApi, tg: FakeTelegram
) -> None:
    with pytest.raises(Exception):  # noqa: B017 - any exception: ingest dead-letters it
        parse_update(tg.pending_update(broken(tg)), api)


@pytest.mark.parametrize("kind", [k for k in RAW_UPDATES if k.startswith("callback")])
async def test_a_press_is_in_the_chat_python_telegram_bot_names(
    kind: str, api: AiogramApi, tg: FakeTelegram
) -> None:
    """Also for a message Telegram no longer shows: its chat still comes with the press."""
    raw = tg.pending_update(RAW_UPDATES[kind](tg))
    own = telegram.Update.de_json(raw, None).effective_chat
    expected = None if own is None else own.id
    for parsed in (parse_update(raw, api), _ptb(raw, api)):
        chat = parsed.effective_chat
        assert (None if chat is None else chat.id) == expected
    assert kind != "callback with inaccessible message" or expected == USER


async def test_get_updates_raw_read_timeout_is_the_whole_wait(api: AiogramApi, tg: FakeTelegram) -> None:
    """Not added to the long poll's ``timeout`` again: ingest already gives it the margin."""
    started = time.monotonic()
    with pytest.raises(TimedOut):
        await api.get_updates_raw(0, 10, 1)
    assert time.monotonic() - started < 5
