"""A whole conversation while Telegram and the model fail, at random (seeded) and on purpose.

The real python-telegram-bot and openai SDK run between the two fakes. The user sends
:data:`MESSAGES` messages one after another — each once the previous answer is in the chat —
and some turns ask for an approval that the user taps (and taps again, stale). Meanwhile
``sendMessage``, ``editMessageText``, ``getUpdates`` and ``answerCallbackQuery`` answer 429
(``retry_after`` 1 s), 502 or hang 1 s before a 504, and the model answers 500s and cut
streams, and once fails three times so that the backup model answers. None of these faults takes effect, so every
answer must be shown exactly once, in order, and every approval decided exactly once.

The one fault that may take effect — a 504 answered *after* Telegram delivered the message
(``applied504``) — is left out of that test: agentgram re-sends (at-least-once), so the message
may be shown twice. :func:`test_a_send_whose_outcome_is_unknown_is_shown_at_least_once` shows
it is never lost.

Telegram's random faults come from the fake's seeded ``chaos``. getUpdates long-polls alongside
the sends, so which call draws which fault depends on timing: the assertions hold for any draw.
A button's answer is retried only once by design (it is useful for seconds), so its faults are
chosen here, at most one per tap — one of each kind on the decisions, drawn from :data:`SEED` on
the stale taps — and each tap is answered on its retry.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgram.runtime.infra.storage.models import ApprovalStatus
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import PROMPT, lines, wait_prompt
from tests.fakes.openai_server import Call, Cut, Error, Reply, Text, ToolCalls
from tests.fakes.telegram_server import Fault, SentMessage

SEED = 20240609
APPLIED_SEED = 6
"""Draws one random ``applied504`` besides the forced one (the answers are sent one by one, so
the draws do not depend on timing)."""
MESSAGES = 10
DECISIONS = {2: "✅ Approve", 5: "❌ Reject", 8: "✅ Approve"}
"""Turns whose model asks to run a command, and the button the user taps."""
DECIDED = {"✅ Approve": "✅ Approved", "❌ Reject": "❌ Rejected"}
STALE = "This request is no longer pending."
FALLBACK = "⚠️ main-model isn't responding, switching to backup-model."
HANG = 1.0
LLM = {"max_retries": 2, "fallback_models": ["backup-model"]}
_TURN = re.compile(r"msg (\d+)\b")


def answer(turn: int) -> str:
    return f"Answer {turn}: " + " ".join(f"w{turn}.{k}" for k in range(14))


def command(turn: int) -> str:
    return f"echo {turn} >> ran.txt"


def model(body: dict[str, Any]) -> Reply:
    """The model: what it answers depends only on what it read, so a retry gets the same."""
    said = [m for m in body["messages"] if m["role"] != "system"]
    users = [m for m in said if m["role"] == "user"]
    turn = int(_TURN.findall(str(users[-1]["content"]))[-1])
    if turn in DECISIONS and said[-1]["role"] == "user":
        return ToolCalls([Call("execute_cmd", {"command": command(turn)})])
    return Text(answer(turn), chunk_size=12, delay=0.03)


def says(needle: str) -> Callable[[dict[str, Any]], bool]:
    return lambda params: needle in str(params.get("text"))


def fail_answer(rig: Rig, kind: str | None) -> None:
    """The next button answer fails once with ``kind`` (the bot's one retry gets through)."""
    if kind == "429":
        rig.tg.fail_next("answerCallbackQuery", status=429, retry_after=1)
    elif kind == "502":
        rig.tg.fail_next("answerCallbackQuery", status=502)
    elif kind == "hang504":
        rig.tg.fail_next("answerCallbackQuery", status=504, hang=HANG)


def force_faults(rig: Rig, turn: int) -> None:
    """Faults forced on purpose before ``turn``'s message, so every kind is surely exercised."""
    tg, llm = rig.tg, rig.llm
    match turn:
        case 0:
            tg.fail_next("sendMessage", status=429, retry_after=1, when=says("Answer 0"))
            tg.fail_next("getUpdates", status=502)
        case 1:
            llm.fail_next(Error(500, "The server had an error while processing your request."))
            tg.fail_next("editMessageText", status=504, hang=HANG)
        case 3:
            llm.fail_next(Cut())  # streamed a little, then the connection dropped
            tg.fail_next("getUpdates", status=504, hang=HANG)
        case 4:
            tg.fail_next("editMessageText", status=502, times=2)
        case 5:
            llm.fail_next(Cut())  # the retry asks for a tool: the partial text must go
        case 6:
            llm.fail_next(Error(500, "overloaded"), times=3, model="main-model")  # fallback
            tg.fail_next("sendMessage", status=504, hang=HANG, when=says("Answer 6"))
        case 7:
            tg.fail_next("editMessageText", status=429, retry_after=1)


async def tap(rig: Rig, prompt: SentMessage, data: str, fault: str | None, *, stale: bool = False) -> None:
    answered = len(rig.tg.callback_answers)
    fail_answer(rig, fault)
    rig.tg.press_button(ALLOWED_USER, prompt.message_id, data, require_button=not stale)
    await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) > answered, timeout=15)


def kind_of(text: str, turn_commands: dict[str, int]) -> str:
    """What a bot message is; anything else (a stray partial text, a repeat) is a failure."""
    if text.startswith("Answer "):
        return "answer"
    if PROMPT in text:
        return "prompt"
    if text == FALLBACK:
        return "fallback"
    if text.startswith("⚙️ execute_cmd · ") and text[len("⚙️ execute_cmd · ") : -2] in turn_commands:
        return "tool line"
    raise AssertionError(f"unexpected message in the chat: {text!r}")


async def test_a_conversation_under_chaos_answers_everything_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    answer_faults = iter(["429", "502", "hang504"])  # the three decisions: one of each, forced
    async with running_bot(tmp_path, llm=LLM) as rig:
        rig.llm.handler = model
        rig.llm.chaos(0.2, kinds=("500", "cut"), seed=SEED, max_faults=4)
        rig.tg.chaos(
            {"sendMessage": 0.2, "editMessageText": 0.2, "getUpdates": 0.15},
            kinds=(Fault.TOO_MANY_REQUESTS, Fault.BAD_GATEWAY, Fault.HANG_504),
            seed=SEED,
            hang=HANG,
            max_faults=12,
        )
        prompts: dict[int, SentMessage] = {}
        pressed: dict[int, str] = {}  # turn -> the tapped button's data
        for turn in range(MESSAGES):
            force_faults(rig, turn)
            rig.say(f"msg {turn}" + (": please run the tool" if turn in DECISIONS else ""))
            if turn in DECISIONS:
                prompt = await wait_prompt(rig, count=len(prompts) + 1)
                prompts[turn], pressed[turn] = prompt, prompt.button_data(DECISIONS[turn])
                await tap(rig, prompt, pressed[turn], next(answer_faults))
            await rig.wait_turns(turn + 1, timeout=30)
            if turn in DECISIONS:  # the same button again, from a client that still shows it
                fault = rng.choice([None, "429", "502", "hang504"])
                await tap(rig, prompts[turn], pressed[turn], fault, stale=True)
        await rig.bot.delivery.idle()

        tg, llm = rig.tg, rig.llm
        texts = rig.texts()
        commands = {command(turn): turn for turn in DECISIONS}
        kinds = Counter(kind_of(text, commands) for text in texts)
        # every message answered exactly once, complete and in order; nothing else shown twice
        assert [t for t in texts if t.startswith("Answer ")] == [answer(turn) for turn in range(MESSAGES)]
        repeated = [t for t, n in Counter(texts).items() if n > 1 and t != FALLBACK]
        assert repeated == []
        fell_back = {json.dumps(r["messages"]) for r in llm.requests if r["model"] == "backup-model"}
        assert kinds["fallback"] == len(fell_back) >= 1, "one notice per round that fell back"
        # every approval prompted once and decided once, as tapped; the tool ran only if approved
        assert [m.message_id for m in rig.chat() if PROMPT in m.visible_text] == [
            p.message_id for p in prompts.values()
        ]
        for turn, prompt in prompts.items():
            shown = tg.message(ALLOWED_USER, prompt.message_id)
            assert command(turn).replace(">", "&gt;") in (shown.text or "")
            assert shown.visible_text.endswith(DECIDED[DECISIONS[turn]]) and shown.buttons == []
            request = await rig.bot.runtime.parts.approval_manager.by_message(ALLOWED_USER, prompt.message_id)
            assert request is not None
            approved = DECISIONS[turn] == "✅ Approve"
            assert request.status == (ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED)
        assert lines(rig.workdir / "ran.txt") == [str(t) for t, b in DECISIONS.items() if b == "✅ Approve"]
        # every tap answered exactly once: the decision, then "no longer pending" for the stale one
        expected = [text for turn in DECISIONS for text in (DECIDED[DECISIONS[turn]], STALE)]
        assert [a.text for a in tg.callback_answers] == expected
        assert tg.unanswered_callbacks() == []
        # the model read every message exactly once, in order
        last = llm.requests[-1]["messages"]
        read = [int(n) for m in last if m["role"] == "user" for n in _TURN.findall(str(m["content"]))]
        assert read == list(range(MESSAGES))
        # every update confirmed
        await tg.wait_for(lambda: tg.unconfirmed() == [], timeout=5)

        faults = Counter(f.method for f in tg.injected)
        llm_faults = Counter(type(f.fault).__name__ for f in llm.injected)
        print(f"\nTelegram faults: {dict(faults)}; LLM faults: {dict(llm_faults)}")
        for method in ("sendmessage", "editmessagetext", "getupdates", "answercallbackquery"):
            assert faults[method] > 0, f"no fault was injected on {method}"
        assert {f.source for f in tg.injected} == {"fail_next", "chaos"}
        assert llm_faults["Error"] > 0 and llm_faults["Cut"] > 0
        assert {f.source for f in llm.injected} == {"fail_next", "chaos"}
        llm.chaos_off()
        tg.chaos_off()


async def test_a_send_whose_outcome_is_unknown_is_shown_at_least_once(tmp_path: Path) -> None:
    """A 504 after Telegram delivered the message: the bot cannot tell and sends again."""
    turns = 4
    async with running_bot(tmp_path, telegram={"stream_first_delay": 5}) as rig:  # one send per answer
        rig.llm.handler = lambda body: Text(answer(int(_TURN.findall(json.dumps(body["messages"]))[-1])))
        rig.tg.fail_next("sendMessage", status=504, hang=1.0, applied=True, when=says("Answer 0"))
        rig.tg.chaos(
            {"sendMessage": 0.4},
            kinds=(Fault.APPLIED_504, Fault.HANG_504, Fault.BAD_GATEWAY),
            seed=APPLIED_SEED,
            hang=1.0,
            max_faults=4,
        )
        for turn in range(turns):
            rig.say(f"msg {turn}")
            await rig.wait_turns(turn + 1, timeout=20)
        texts = rig.texts()
        first_seen = list(dict.fromkeys(t for t in texts if t.startswith("Answer ")))
        assert first_seen == [answer(turn) for turn in range(turns)], "none lost, in order"
        assert texts.count(answer(0)) >= 2, "the applied send was sent again"
        applied = [f for f in rig.tg.injected if f.applied]
        assert {f.source for f in applied} == {"fail_next", "chaos"}
        assert len(texts) <= turns + len(applied), "a repeat only where the outcome was unknown"
        print(f"\nTelegram faults: {Counter((f.kind or f.source) for f in rig.tg.injected)}")
