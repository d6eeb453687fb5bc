"""Random and malformed updates, from the allowed user and from strangers: the bot stays up.

:data:`UPDATES` updates drawn from ``random.Random(SEED)``: texts with random characters and
entities, fields missing or of the wrong type, unknown update types, poison updates, edited
messages, stickers and photos, group messages, and button presses with garbage data (or with
a prompt's real data, by a stranger). While they arrive the allowed user's turn waits for an
approval, so the model must not be asked anything at all, and the strangers must not get the
command approved.

Afterwards: the ingest task still runs and answers a normal message; no model request carries
anything a stranger, a group or an edit said; no tool ran; every callback query python-telegram-bot
could parse was answered (a stranger's with the access gate's refusal); what it could not parse
is a dead letter, each once; and the offset moved past every update, never back.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgram.bot.telegram.core.callback_data import decode
from agentgram.bot.telegram.core.ingest import OFFSET_KEY
from tests.conftest import ALLOWED_USER, STRANGER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import wait_prompt
from tests.fakes.openai_server import Call, Reply, Text, ToolCalls
from tests.fakes.telegram_server import FakeTelegram, SentMessage

SEED = 90210
UPDATES = 150
GROUP = -100_500
ASK = "please run the fuzz tool"
TOOL_RAN = "tool-ran.txt"
FOREIGN = "FOREIGN-WORDS"
"""In all a stranger, a group, an edit or a photo caption says: the model must never read it."""
HARMLESS_COMMANDS = ("/help", "/start", "/approvals", "/trust", "/nonsense", "/help@agentgram_test_bot")
_CHARS = string.ascii_letters + string.digits + string.punctuation + " \n\t" + "äß漢字🙂👍🏽‍️\u200b\u202e<>&"


@dataclass(slots=True)
class Sent:
    update_id: int
    payload: dict[str, Any]
    kind: str
    user: int
    query_id: str | None = None


def model(body: dict[str, Any]) -> Reply:
    said = [m for m in body["messages"] if m["role"] != "system"]
    if said[-1]["role"] == "user" and ASK in str(said[-1]["content"]):
        if not any(m["role"] == "tool" for m in said):
            return ToolCalls([Call("execute_cmd", {"command": f"touch {TOOL_RAN}"})])
    if said[-1]["role"] == "user" and "still there" in str(said[-1]["content"]):
        return Text("Still here.")
    return Text("ok")


def noise(rng: random.Random, longest: int = 120) -> str:
    text = "".join(rng.choice(_CHARS) for _ in range(rng.randint(1, longest))).lstrip("/")
    return text if text.strip() else "x"


def odd_value(rng: random.Random) -> Any:
    return rng.choice([None, 0, -1, 1.5, True, "", "x" * 70, [], ["a"], {}, {"id": "x"}, 10**20])


def entities(rng: random.Random, text: str) -> Any:
    if rng.random() < 0.15:
        return odd_value(rng)
    kinds = ["bold", "italic", "url", "text_link", "mention", "code", "pre", "spoiler", "future_kind"]
    found = []
    for _ in range(rng.randint(1, 4)):
        entity: dict[str, Any] = {
            "type": rng.choice(kinds),
            "offset": rng.randint(-3, len(text) + 5),
            "length": rng.randint(-1, len(text) + 5),
        }
        if entity["type"] == "text_link":
            entity["url"] = rng.choice(["https://example.org", 5, None, "javascript:alert(1)"])
        found.append(entity)
    return found


class Fuzzer:
    """Draws updates and remembers what each one was."""

    def __init__(self, rig: Rig, rng: random.Random, prompt: SentMessage) -> None:
        self.rig, self.tg, self.rng = rig, rig.tg, rng
        self.prompt = prompt
        self.real_data = [data for row in prompt.buttons for _, data in row if data is not None]
        self.sent: list[Sent] = []
        self.written: dict[int, list[tuple[int, int]]] = {ALLOWED_USER: [], STRANGER: []}
        """(update id, message id) of each user's texts, for edits."""
        self.next_raw_id = 50_000
        self.draws: list[Callable[[int], tuple[str, int]]] = [
            self.text, self.text, self.command, self.raw_message, self.raw_message, self.edit,
            self.media, self.group, self.poison, self.unknown, self.press, self.raw_press, self.raw_press,
        ]  # fmt: skip

    def prompt_dict(self) -> dict[str, Any]:
        """The prompt as Telegram shows it inside an update."""
        chat = {"id": ALLOWED_USER, "type": "private", "first_name": "Ann"}
        return {
            "message_id": self.prompt.message_id, "from": self.tg.bot_user, "chat": chat,
            "date": self.prompt.date, "text": self.prompt.visible_text, "reply_markup": self.prompt.reply_markup,
        }  # fmt: skip

    def user(self) -> int:
        return ALLOWED_USER if self.rng.random() < 0.5 else STRANGER

    def record(self, update_id: int, kind: str, user: int) -> None:
        payload = self.tg.pending_update(update_id)  # read before the bot can fetch it
        query = payload.get("callback_query")
        query_id = query.get("id") if isinstance(query, dict) else None
        self.sent.append(Sent(update_id, payload, kind, user, query_id))

    def one(self) -> int:
        draw = self.rng.choice(self.draws)
        user = self.user()
        kind, update_id = draw(user)
        self.record(update_id, kind, user)
        return update_id

    def words(self, user: int) -> str:
        """Random text; a stranger's carries the marker the model must never read."""
        text = noise(self.rng)
        return f"{FOREIGN} {text}" if user != ALLOWED_USER else text

    def text(self, user: int) -> tuple[str, int]:
        update_id = self.tg.send_text(user, self.words(user))
        self.written[user].append((update_id, self.tg.pending_update(update_id)["message"]["message_id"]))
        return "text", update_id

    def command(self, user: int) -> tuple[str, int]:
        if user == ALLOWED_USER:
            text = self.rng.choice(HARMLESS_COMMANDS) + " " + noise(self.rng, 20)
        else:  # a stranger may try anything
            text = self.rng.choice(["/stop", "/new", "/start", "/cron", "/trust"])
        return "command", self.tg.send_text(user, text)

    def base_message(self, user: int) -> dict[str, Any]:
        self.next_raw_id += 1
        return {
            "message_id": self.next_raw_id,
            "from": {"id": user, "is_bot": False, "first_name": "Fuzz"},
            "chat": {"id": user, "type": "private", "first_name": "Fuzz"},
            "date": 1_700_000_000,
        }

    def raw_message(self, user: int) -> tuple[str, int]:
        """A message as no Telegram sends it: random entities, fields missing or mistyped."""
        message: dict[str, Any] = self.base_message(user)
        text = self.words(user)
        message["text"] = text
        message["entities"] = entities(self.rng, text)
        for _ in range(self.rng.randint(0, 2)):
            field = self.rng.choice(["message_id", "from", "chat", "date", "text", "entities", "caption"])
            if self.rng.random() < 0.3:
                message.pop(field, None)
            elif field != "text" or user != ALLOWED_USER:
                message[field] = odd_value(self.rng)
            else:
                message[field] = self.rng.choice([123, ["a"], {"a": 1}, True])
        if user != ALLOWED_USER and self.rng.random() < 0.3:
            message["reply_to_message"] = self.prompt_dict()  # "reply" to the prompt
        if self.rng.random() < 0.2:
            message["future_field"] = {"nested": odd_value(self.rng)}
        return "raw message", self.tg.send_raw_update({"message": message})

    def edit(self, user: int) -> tuple[str, int]:
        # only a fetched message: the fake edits the very dict a pending update would deliver
        fetched = [message for update, message in self.written[user] if update < self.tg.confirmed_offset]
        if not fetched:
            return self.text(user)
        message_id = self.rng.choice(fetched)
        return "edit", self.tg.send_edited_text(user, message_id, f"{FOREIGN} edited {noise(self.rng, 30)}")

    def media(self, user: int) -> tuple[str, int]:
        if self.rng.random() < 0.5:
            return "sticker", self.tg.send_sticker(user)
        # an allowed user's caption reaches the model with the photo (issue 15); a stranger's never
        return "photo", self.tg.send_photo(user, caption=self.words(user))

    def group(self, user: int) -> tuple[str, int]:
        text = f"{FOREIGN} {noise(self.rng, 40)}"
        return "group", self.tg.send_text(user, text, chat_id=GROUP, chat_type="group")

    def poison(self, user: int) -> tuple[str, int]:
        choice = self.rng.randrange(3)
        if choice == 0:
            return "poison", self.tg.send_poll_missing_allows_revoting(user, force=True)
        if choice == 1:
            return "poison", self.tg.send_message_with_bad_chat(user, odd_value(self.rng), force=True)
        return "poison", self.tg.send_raw_update({"message": odd_value(self.rng)}, force=True)

    def unknown(self, user: int) -> tuple[str, int]:
        kind = self.rng.choice(
            ["future_update", "message_reaction", "poll_answer", "chat_boost", "inline_query"]
        )
        body = self.rng.choice([None, odd_value(self.rng), {"id": "1", "from": {"id": user}}])
        return "unknown", self.tg.send_unknown_update(kind, body, force=True)

    def garbage_data(self, user: int) -> str:
        """Button data: garbage, a stale-looking id, or (a stranger's) the prompt's real data."""
        if user != ALLOWED_USER and self.rng.random() < 0.4:
            return self.rng.choice(self.real_data)
        while True:
            data = self.rng.choice(
                [noise(self.rng, 64), "ag1:ap:bogus" + str(self.rng.randrange(999)), "ag1:zz:x", "ag1:"]
            )[:64]
            button = decode(data)
            # the allowed user's taps must not decide the real request (that would be theirs to do)
            if user != ALLOWED_USER or button is None or button.arg.startswith("bogus"):
                return data

    def press(self, user: int) -> tuple[str, int]:
        data = self.garbage_data(user)
        pressed = self.tg.press_button(
            user, self.prompt.message_id, data, chat_id=ALLOWED_USER, require_button=False
        )
        return "press", pressed

    def raw_press(self, user: int) -> tuple[str, int]:
        """A callback query whose message or data is no message or no string."""
        message: Any = self.rng.choice([None, self.prompt_dict(), self.prompt_dict(), 12345, "x", [], {}])
        data: Any = self.garbage_data(user)
        if self.rng.random() < 0.5:
            data = odd_value(self.rng)
        return "raw press", self.tg.press_button_with_broken_message(user, data, message=message, force=True)


async def confirmed(tg: FakeTelegram, update_id: int) -> None:
    """Wait until the bot confirmed ``update_id`` (it asked for the updates after it)."""
    await tg.wait_for(lambda: tg.confirmed_offset > update_id, timeout=20)


def parses(rig: Rig, payload: dict[str, Any]) -> bool:
    try:
        rig.bot.driver.parse(payload)
    except Exception:
        return False
    return True


async def test_random_and_malformed_updates_leave_the_bot_serving(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    async with running_bot(tmp_path) as rig:
        tg, llm = rig.tg, rig.llm
        llm.handler = model
        rig.say(ASK)
        prompt = await wait_prompt(rig)
        asked = llm.calls
        fuzz = Fuzzer(rig, rng, prompt)
        while len(fuzz.sent) < UPDATES:
            batch = [fuzz.one() for _ in range(min(rng.randint(1, 12), UPDATES - len(fuzz.sent)))]
            await confirmed(tg, batch[-1])

        # nothing reached the model, nothing ran, the prompt is as it was
        assert rig.bot._ingest_task is not None and not rig.bot._ingest_task.done()
        assert llm.calls == asked, "the turn waits for its approval: nobody may ask the model"
        pending = await rig.bot.runtime.parts.approval_manager.pending()
        assert [r.message_id for r in pending] == [prompt.message_id]
        assert not (rig.workdir / TOOL_RAN).exists()
        assert tg.message(ALLOWED_USER, prompt.message_id).edits == []

        # every callback query the library could read was answered; strangers were refused
        answers = {a.callback_query_id: a.text for a in tg.callback_answers}
        not_yours = rig.bot.translator.t("en", "approval-not-yours")
        queries = [s for s in fuzz.sent if s.query_id is not None]
        readable = [s for s in queries if parses(rig, s.payload)]
        assert readable and len(readable) < len(queries), "both kinds were drawn"
        assert [s.query_id for s in readable if s.query_id not in answers] == []
        assert set(tg.unanswered_callbacks()) <= {s.query_id for s in queries if s not in readable}
        from_strangers = [s for s in readable if s.user == STRANGER]
        assert from_strangers and all(answers[str(s.query_id)] == not_yours for s in from_strangers)

        # what could not be parsed is a dead letter, each once; the offset passed every update
        letters = await rig.bot.runtime.parts.session_store.dead_letters()
        unreadable = [s.update_id for s in fuzz.sent if not parses(rig, s.payload)]
        assert sorted(int(letter.ref) for letter in letters) == unreadable
        offsets = [int(c.params.get("offset") or 0) for c in tg.calls("getUpdates")]
        assert offsets == sorted(offsets), "the offset never went back: nothing fetched twice"

        # the stranger was told once; the user decides, and the bot still answers
        assert len(tg.messages(STRANGER)) <= 1, "a stranger is answered once at most"
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("❌ Reject"))
        await rig.wait_turns(timeout=15)
        final = rig.say("are you still there?")
        await rig.wait_text("Still here.", timeout=15)
        assert not (rig.workdir / TOOL_RAN).exists()
        read = json.dumps([r["messages"] for r in llm.requests], ensure_ascii=False)
        assert FOREIGN not in read, "a stranger's, a group's or an edit's words reached the model"
        assert await rig.bot.runtime.parts.session_store.get_value(OFFSET_KEY) == str(final + 1)
        await tg.wait_for(lambda: tg.unconfirmed() == [], timeout=5)
        kinds = sorted({s.kind for s in fuzz.sent})
        print(f"\n{len(fuzz.sent)} updates ({', '.join(kinds)}); {len(letters)} dead letters")
