"""Webhook mode (``telegram.mode: webhook``): the fake Bot API POSTs updates to the bot's own listener
as Telegram does (per chat in order, retrying non-2xx), and the bot answers 200 only once an
update's effect is stored."""

from __future__ import annotations

import io
import json
import re
import socket
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from sqlalchemy.engine import make_url

from agentgram.bot.telegram.core.webhook import MAX_BODY, SECRET_HEADER
from tests.backends import pg_database, pg_server_url
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text

SECRET = "s3cret-token_" + "x" * 24
PATH = "/telegram/webhook"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def webhook_bot(tmp_path: Path, storage_url: str | None = None, **telegram: Any) -> AsyncIterator[Rig]:
    port = _free_port()
    hook = {"listen": f"127.0.0.1:{port}", "public_url": f"http://127.0.0.1:{port}", "secret_token": SECRET}
    sections: dict[str, Any] = {"telegram": {"mode": "webhook", "webhook": hook, **telegram}}
    if storage_url is not None:
        sections["storage"] = {"url": storage_url}
    async with running_bot(tmp_path, **sections) as rig:
        yield rig


def url(rig: Rig, path: str = PATH) -> str:
    assert rig.bot.webhook is not None
    host, port = rig.bot.webhook.address
    return f"http://{host}:{port}{path}"


async def post(rig: Rig, body: bytes, secret: str | None = SECRET) -> aiohttp.ClientResponse:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    async with (
        aiohttp.ClientSession() as http,
        http.post(url(rig), data=io.BytesIO(body), headers=headers) as answer,
    ):
        await answer.read()
        return answer


def mail(rig: Rig) -> list[tuple[int, str]]:
    """Every stored mail's (chat, envelope id), in the order it was stored."""
    with sqlite3.connect(rig.bot.settings.storage.url.removeprefix("sqlite+aiosqlite:///")) as db:
        rows = db.execute(
            "SELECT s.chat_id, m.envelope_id FROM session_mail m JOIN sessions s ON s.id = m.session_id "
            "ORDER BY m.id"
        )
        return [(int(chat), str(envelope)) for chat, envelope in rows]


def user_texts(rig: Rig) -> list[str]:
    return [
        str(m.get("content"))
        for request in rig.llm.requests
        for m in request["messages"]
        if m.get("role") == "user"
    ]


async def test_a_chat_is_answered_through_the_webhook_and_polling_is_never_used(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        assert rig.tg.webhook_url == f"{url(rig)}" and rig.tg.webhook_secret == SECRET
        [registered] = rig.tg.calls("setWebhook")
        assert "drop_pending_updates" not in registered.params
        assert json.loads(registered.params["allowed_updates"]) == [
            "message",
            "edited_message",
            "callback_query",
        ]
        rig.llm.script(Text("Hello over the webhook."))
        update_id = rig.say("hello")
        await rig.wait_text("Hello over the webhook.")
        assert [(d.update_id, d.status) for d in rig.tg.webhook_deliveries] == [(update_id, 200)]
        assert mail(rig) == [(ALLOWED_USER, f"tg:{update_id}:{_day(rig, update_id)}")]
    assert rig.tg.calls("getUpdates") == [] and rig.tg.calls("deleteWebhook") == []
    assert rig.tg.webhook_url, "a stopped instance leaves the webhook set"


def _day(rig: Rig, update_id: int) -> str:
    """The UTC day of the message the fake delivered as ``update_id`` (the key's window)."""
    date = rig.tg.delivered_updates[update_id]["message"]["date"]
    return datetime.fromtimestamp(date, UTC).strftime("%Y%m%d")


async def test_a_post_without_or_with_a_wrong_secret_is_403_and_stores_nothing(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        body = json.dumps({"update_id": 5, "message": _message(ALLOWED_USER, "sneaky")}).encode()
        for secret in (None, "wrong", SECRET[:-1] + "y", ""):
            answer = await post(rig, body, secret)
            assert answer.status == 403
        assert mail(rig) == [] and await rig.bot.runtime.parts.session_store.dead_letters() == []
        assert rig.llm.requests == []


async def test_a_malformed_body_is_200_and_a_dead_letter(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        assert (await post(rig, b"{not json")).status == 200
        assert (await post(rig, b'{"message": {}}')).status == 200
        assert (await post(rig, b"x" * (MAX_BODY + 10))).status == 200
        broken = rig.tg.press_button_with_broken_message(ALLOWED_USER, force=True)  # the driver refuses it
        await rig.tg.wait_for(lambda: rig.tg.unconfirmed() == [])
        letters = await rig.bot.runtime.parts.session_store.dead_letters()
        assert [letter.ref for letter in letters] == ["?", "?", "?", str(broken)]
        assert "not JSON" in letters[0].error and "update_id" in letters[1].error
        assert "over" in letters[2].error and len(letters[2].payload) < MAX_BODY
        assert [d.status for d in rig.tg.webhook_deliveries] == [200]
        assert mail(rig) == []


async def test_an_unknown_update_type_is_200_and_ignored(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        unknown = rig.tg.send_unknown_update(force=True)
        await rig.tg.wait_for(lambda: rig.tg.unconfirmed() == [])
        assert [(d.update_id, d.status) for d in rig.tg.webhook_deliveries] == [(unknown, 200)]
        direct = json.dumps({"update_id": 9, "future_update": {"id": 1}}).encode()
        assert (await post(rig, direct)).status == 200
        assert mail(rig) == [] and await rig.bot.runtime.parts.session_store.dead_letters() == []


async def test_the_same_update_posted_twice_is_answered_once(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        rig.llm.script(Text("Only once."))
        update_id = rig.say("say it once")
        await rig.wait_turns()
        again = {"update_id": update_id, "message": _sent_message(rig, update_id)}
        assert (await post(rig, json.dumps(again).encode())).status == 200
        assert (await post(rig, json.dumps(again).encode())).status == 200
        await rig.bot.delivery.idle()
        assert len(mail(rig)) == 1 and len(rig.llm.requests) == 1
        assert rig.texts().count("Only once.") == 1


async def test_three_chats_of_four_messages_are_answered_once_and_in_order(tmp_path: Path) -> None:
    users = (ALLOWED_USER, ALLOWED_USER + 1, ALLOWED_USER + 2)
    async with webhook_bot(tmp_path, allowed_user_ids=list(users)) as rig:
        rig.llm.handler = lambda body: Text(f"Got {_last_user(body)}.")
        sent = {user: [rig.tg.send_text(user, f"chat {user} msg {n}") for n in range(4)] for user in users}
        await rig.tg.wait_for(lambda: rig.tg.unconfirmed() == [], timeout=15)
        for user in users:
            await rig.tg.wait_for(lambda u=user: _replied(rig, u, f"chat {u} msg 3"), timeout=20)
        await rig.bot.delivery.idle()
        stored = mail(rig)
        for user in users:
            ids = [envelope for chat, envelope in stored if chat == user and envelope.startswith("tg:")]
            assert [int(envelope.split(":")[1]) for envelope in ids] == sent[user], "once each, in order"
            said = [t for t in user_texts(rig) if f"chat {user} " in t]
            seen = [int(n) for t in said for n in re.findall(rf"chat {user} msg (\d)", t)]
            assert sorted(set(seen)) == [0, 1, 2, 3] and _in_order(seen), seen
        delivered = [d.update_id for d in rig.tg.webhook_deliveries if d.status == 200]
        assert sorted(delivered) == sorted(u for ids in sent.values() for u in ids)


async def test_a_draining_instance_answers_503_with_retry_after(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        assert rig.bot.webhook is not None
        rig.bot.webhook.ingest.drain()
        body = json.dumps({"update_id": 7, "message": _message(ALLOWED_USER, "too late")}).encode()
        answer = await post(rig, body)
        assert answer.status == 503 and answer.headers["Retry-After"].isdigit()
        assert (await post(rig, body, "wrong")).status == 403, "the secret is checked first"
        update_id = rig.say("while draining")
        await rig.tg.wait_for(lambda: any(d.update_id == update_id for d in rig.tg.webhook_deliveries))
        assert rig.tg.webhook_deliveries[0].status == 503 and update_id in rig.tg.unconfirmed()
        assert mail(rig) == []


async def test_healthz_reports_the_database_the_last_post_and_telegrams_last_error(tmp_path: Path) -> None:
    async with webhook_bot(tmp_path) as rig:
        health = await _health(rig)
        assert health["status"] == "ok" and health["database"] == "ok" and health["last_post"] is None
        assert (health["role"], health["heartbeat"]) == ("single", None), "no cluster"
        assert health["webhook_url"] == url(rig) and health["last_error"] is None
        rig.bot.webhook.ingest.drain()  # type: ignore[union-attr]
        rig.say("refused while draining")
        await rig.tg.wait_for(lambda: rig.tg.webhook_last_error is not None)
        rig.bot.webhook._info = None  # type: ignore[union-attr]  # past the getWebhookInfo cache
        health = await _health(rig, status=503)
        assert health["status"] == "down" and health["draining"] is True
        assert health["last_post"] is not None and "503" in health["last_error"]


async def _health(rig: Rig, status: int = 200) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url(rig, "/healthz")) as answer:
        assert answer.status == status
        return dict(await answer.json())


def _message(user: int, text: str) -> dict[str, Any]:
    chat = {"id": user, "type": "private", "first_name": "Ann"}
    return {
        "message_id": 1,
        "date": 1_700_000_000,
        "chat": chat,
        "from": {**chat, "is_bot": False},
        "text": text,
    }


def _sent_message(rig: Rig, update_id: int) -> dict[str, Any]:
    """What the fake delivered as ``update_id`` (kept for a redelivery)."""
    return dict(rig.tg.delivered_updates[update_id]["message"])


def _last_user(body: dict[str, Any]) -> str:
    said = [str(m.get("content")) for m in body["messages"] if m.get("role") == "user"]
    found = re.findall(r"chat \d+ msg \d", said[-1]) if said else []
    return found[-1] if found else "?"


def _replied(rig: Rig, user: int, needle: str) -> bool:
    return any(needle in m.visible_text for m in rig.tg.messages(user))


def _in_order(seen: list[int]) -> bool:
    firsts = list(dict.fromkeys(seen))
    return firsts == sorted(firsts)


async def test_a_database_that_does_not_answer_gets_503_and_telegrams_retry_is_answered_once(
    tmp_path: Path,
) -> None:
    """The bot's own PostgreSQL database stops taking connections (the others on the server go on):
    a POST is refused with 503 and ``Retry-After`` and nothing is stored; once the database is back,
    Telegram's next try is stored and answered, once."""
    async with pg_database() as database_url, webhook_bot(tmp_path, database_url) as rig:
        name = str(make_url(database_url).database)
        rig.llm.script(Text("Back again."))
        await _database_connections(name, allow=False)
        try:
            update_id = rig.say("are you there?")
            await rig.tg.wait_for(
                lambda: any(d.update_id == update_id for d in rig.tg.webhook_deliveries), 20
            )
            first = next(d for d in rig.tg.webhook_deliveries if d.update_id == update_id)
            assert first.status == 503 and update_id in rig.tg.unconfirmed()
            assert rig.tg.webhook_last_error is not None and "503" in rig.tg.webhook_last_error[1]
            assert not any("Back again." in t for t in rig.texts())
        finally:
            await _database_connections(name, allow=True)
        await rig.wait_text("Back again.", timeout=30)
        await rig.wait_turns()
        statuses = [d.status for d in rig.tg.webhook_deliveries if d.update_id == update_id]
        assert statuses[0] == 503 and statuses[-1] == 200 and statuses.count(200) == 1
        assert [t for t in rig.texts() if "Back again." in t] == ["Back again."]
        assert update_id not in rig.tg.unconfirmed()


async def _database_connections(name: str, *, allow: bool) -> None:
    """Let the test server's database ``name`` take connections again, or refuse them and end its
    open ones (the bot's pool): for the bot, its database is down."""
    admin = await asyncpg.connect(
        make_url(pg_server_url()).set(drivername="postgresql").render_as_string(False)
    )
    try:
        await admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {str(allow).lower()}')
        if not allow:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
            )
    finally:
        await admin.close()
