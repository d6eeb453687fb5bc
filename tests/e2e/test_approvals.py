"""Approvals end to end: real python-telegram-bot and openai SDK between the two fakes.

Each test scripts the model to call a tool, waits for the prompt in the chat, acts as the user
(taps, replies, commands) and checks what the model reads next and what the chat shows.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentgram.bot.telegram.core.callback_data import decode
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext
from agentgram.runtime.core.approvals.manager import PROMPT_NOT_SHOWN
from agentgram.runtime.core.mailbox import Envelope, ScheduledTurnBody, Sender, SenderKind
from agentgram.runtime.infra.storage.models import utcnow
from tests.conftest import ALLOWED_USER, STRANGER, also_on_postgres
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

PROMPT = "Approval needed"


def shell(command: str) -> ToolCalls:
    return ToolCalls([("execute_cmd", {"command": command})])


def prompts(rig: Rig, prompt_text: str = PROMPT) -> list[SentMessage]:
    return [m for m in rig.chat() if prompt_text in m.visible_text]


async def wait_prompt(rig: Rig, count: int = 1, prompt_text: str = PROMPT) -> SentMessage:
    """The ``count``-th approval prompt, once it is in the chat and its message id is stored
    (a moment after Telegram accepted it; a reply to the prompt is recognised from then on)."""
    await rig.tg.wait_for(lambda: len(prompts(rig, prompt_text)) >= count)
    prompt = prompts(rig, prompt_text)[count - 1]
    deadline = asyncio.get_running_loop().time() + 5.0
    while await rig.bot.runtime.parts.approval_manager.by_message(ALLOWED_USER, prompt.message_id) is None:
        assert asyncio.get_running_loop().time() < deadline, "the prompt's message id was never stored"
        await asyncio.sleep(0.01)
    return prompt


async def wait_decided(rig: Rig, prompt: SentMessage, ending: str) -> SentMessage:
    await rig.tg.wait_for(
        lambda: rig.tg.message(ALLOWED_USER, prompt.message_id).visible_text.endswith(ending)
    )
    return rig.tg.message(ALLOWED_USER, prompt.message_id)


def as_sent(message: SentMessage) -> SentMessage:
    """The message as first sent (with its original keyboard), whatever edits came since."""
    markup = message.markup_edits[0] if message.markup_edits else message.reply_markup
    return replace(message, reply_markup=markup)


def tap(rig: Rig, prompt: SentMessage, label: str, user: int = ALLOWED_USER) -> int:
    return rig.tg.press_button(user, prompt.message_id, prompt.button_data(label), chat_id=ALLOWED_USER)


async def toast(rig: Rig, count: int = 1) -> str | None:
    """The text of the ``count``-th callback answer."""
    await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) >= count)
    return rig.tg.callback_answers[count - 1].text


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# --- approve, reject, reply with a reason ------------------------------------------------------


@also_on_postgres
async def test_approve_runs_the_command_once_and_marks_the_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        assert "echo hi &gt;&gt; ran.txt" in (prompt.text or "") and str(rig.workdir) in prompt.visible_text
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        decided = await wait_decided(rig, prompt, "✅ Approved")
        assert decided.buttons == []
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert tool_results(rig.llm.requests[1]) == ["(no output)\nexit code: 0"]
        assert await toast(rig) == "✅ Approved"


@also_on_postgres
async def test_reject_tells_the_model_exactly(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("OK, I won't."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "❌ Reject")
        await rig.wait_turns()
        decided = await wait_decided(rig, prompt, "❌ Rejected")
        assert decided.buttons == []
        assert tool_results(rig.llm.requests[1]) == ["User rejected this tool call."]
        assert not (rig.workdir / "ran.txt").exists()


async def test_reply_to_the_prompt_rejects_with_the_reason(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("psql prod -c 'select 1'"), Text("Switching to staging."))
        rig.say("check the db")
        prompt = await wait_prompt(rig)
        rig.say("no — use the staging DB", reply_to_message_id=prompt.message_id)
        await rig.wait_turns()
        await wait_decided(rig, prompt, "❌ Rejected: no — use the staging DB")
        second = rig.llm.requests[1]
        assert tool_results(second) == ["User rejected this tool call. Reason: no — use the staging DB"]
        assert all("staging" not in text for text in user_texts(second))
        assert rig.llm.calls == 2


async def test_a_long_reason_reaches_the_model_whole_and_the_prompt_shortened(tmp_path: Path) -> None:
    reason = "no: " + "use the staging database instead " * 120  # ≤ 4096, like a real message
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("psql prod"), Text("OK."))
        rig.say("check the db")
        prompt = await wait_prompt(rig)
        rig.say(reason, reply_to_message_id=prompt.message_id)
        await rig.wait_turns()
        decided = await wait_decided(rig, prompt, "…")
        assert decided.buttons == [] and "❌ Rejected: no: use the staging" in decided.visible_text
        assert tool_results(rig.llm.requests[1]) == [
            f"User rejected this tool call. Reason: {reason.strip()}"
        ]


async def test_the_prompt_speaks_the_users_language(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("ls"), Text("Готово."))
        rig.say("покажи файлы", language_code="ru")
        prompt = await wait_prompt(rig, prompt_text="Нужно ваше подтверждение")
        assert [label for row in prompt.buttons for label, _ in row] == [
            "✅ Разрешить",
            "❌ Отклонить",
            "⏱ 15 мин",
            "🔁 Всегда",
        ]
        tap(rig, prompt, "✅ Разрешить")
        await rig.wait_turns()
        await wait_decided(rig, prompt, "✅ Разрешено")


# --- taps that must do nothing (twice) ----------------------------------------------------------


async def test_double_tap_and_stale_tap_run_the_command_once(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        data = prompt.button_data("✅ Approve")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, data)
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, data)  # double tap, before any edit
        await rig.wait_turns()
        await wait_decided(rig, prompt, "✅ Approved")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, data, require_button=False)  # stale client
        await toast(rig, 3)
        assert sorted(a.text or "" for a in rig.tg.callback_answers) == [
            "This request is no longer pending.",
            "This request is no longer pending.",
            "✅ Approved",
        ]
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert rig.llm.calls == 2


async def test_a_strangers_tap_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("OK."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        keyboard = prompt.buttons
        tap(rig, prompt, "✅ Approve", user=STRANGER)
        tap(rig, prompt, "⏱ 15 min", user=STRANGER)
        assert await toast(rig, 2) == "This button isn't for you."
        assert rig.tg.callback_answers[0].text == "This button isn't for you."
        assert prompt.buttons == keyboard and not prompt.edits
        assert await rig.bot.runtime.parts.approval_manager.pending() != []
        tap(rig, prompt, "❌ Reject")
        await rig.wait_turns()
        assert not (rig.workdir / "ran.txt").exists()
        assert tool_results(rig.llm.requests[1]) == ["User rejected this tool call."]


async def test_garbage_callback_data_is_answered_and_runs_nothing(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("OK."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        keyboard = prompt.buttons
        for data in ("garbage", "ag1:ap:", "ag1:zz:abc", "ag1:ap:no-such-request", "ag1:ap:a:b"):
            rig.tg.press_button(ALLOWED_USER, prompt.message_id, data, require_button=False)
        await toast(rig, 5)
        assert rig.tg.unanswered_callbacks() == []
        assert [a.text for a in rig.tg.callback_answers] == [
            "This button no longer works.",
            "This button no longer works.",
            "This button no longer works.",
            "This request is no longer pending.",
            "This button no longer works.",
        ]
        assert not (rig.workdir / "ran.txt").exists()
        assert prompt.buttons == keyboard and not prompt.edits
        assert [r.message_id for r in await rig.bot.runtime.parts.approval_manager.pending()] == [
            prompt.message_id
        ]
        assert rig.llm.calls == 1


# --- trust: ⏱ 15 min and 🔁 Always -----------------------------------------------------------------


async def test_trust_for_a_while_approves_and_skips_the_next_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo 1 >> ran.txt"), Text("one"), shell("echo 2 >> ran.txt"), Text("two"))
        rig.say("first")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "⏱ 15 min")
        await rig.wait_turns()
        await wait_decided(rig, prompt, "✅ Approved")
        assert await toast(rig) == "⏱ I won't ask about shell commands for 15 min."
        rig.say("second")
        await rig.wait_turns(2)
        assert lines(rig.workdir / "ran.txt") == ["1", "2"]
        assert len(prompts(rig)) == 1


async def test_trust_for_a_while_expires(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval={"bypass_duration": 0.3}) as rig:
        rig.llm.script(shell("echo 1 >> ran.txt"), Text("one"), shell("echo 2 >> ran.txt"), Text("two"))
        rig.say("first")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "⏱ 15 min")
        await rig.wait_turns()
        session = await rig.bot.runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
        bypasses = rig.bot.runtime.parts.approval_manager.bypasses
        await rig.tg.wait_for(lambda: not bypasses.active(session.id or 0, utcnow()))
        rig.say("second")
        second = await wait_prompt(rig, 2)
        assert "echo 2" in second.visible_text
        tap(rig, second, "✅ Approve")
        await rig.wait_turns(2)
        assert lines(rig.workdir / "ran.txt") == ["1", "2"]


async def test_always_shows_the_rule_saves_it_on_confirm_and_approves(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hello one"), Text("one"), shell("echo hello two"), Text("two"))
        rig.say("first")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "🔁 Always")
        confirm = await rig.wait_text("without asking?")
        assert "Always allow execute_cmd echo hello * without asking?" in confirm.visible_text
        assert [r for r in rig.bot.runtime.parts.approval_manager.rules() if r.origin == "user"] == []
        rig.tg.press_button_labeled(ALLOWED_USER, confirm.message_id, "✅ Yes")
        await rig.wait_turns()
        await wait_decided(rig, prompt, "✅ Approved")
        await rig.wait_text("Saved: I won't ask about execute_cmd echo hello * any more.")
        assert rig.tg.message(ALLOWED_USER, confirm.message_id).buttons == []
        saved = [r for r in rig.bot.runtime.parts.approval_manager.rules() if r.origin == "user"]
        assert [(r.tool, r.path, r.action) for r in saved] == [("execute_cmd", "echo hello *", "allow")]
        rig.say("second")
        await rig.wait_turns(2)
        assert len(prompts(rig)) == 1
        assert tool_results(rig.llm.requests[3])[-1] == "hello two\nexit code: 0"


async def test_always_cancelled_keeps_the_prompt_pending(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hello one"), Text("one"))
        rig.say("first")
        prompt = await wait_prompt(rig)
        tap(rig, prompt, "🔁 Always")
        confirm = await rig.wait_text("without asking?")
        rig.tg.press_button_labeled(ALLOWED_USER, confirm.message_id, "✖️ Cancel")
        await rig.tg.wait_for(lambda: rig.tg.message(ALLOWED_USER, confirm.message_id).deleted)
        assert rig.bot.runtime.parts.approval_manager.rules() == [
            r for r in rig.bot.runtime.parts.approval_manager.rules() if r.origin != "user"
        ]
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["hello one\nexit code: 0"]


# --- policy: deny rules, headless sessions ----------------------------------------------------------


async def test_a_deny_rule_refuses_without_a_prompt(tmp_path: Path) -> None:
    deny = {"tool": "execute_cmd", "path": "rm *", "action": "deny", "priority": 5}
    async with running_bot(tmp_path, approval={"rules": [deny]}) as rig:
        rig.llm.script(shell("rm -rf notes"), Text("Not allowed."))
        rig.say("delete notes")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["Tool call denied by approval policy."]
        assert prompts(rig) == []


async def test_a_headless_session_auto_denies_without_a_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Could not run it."))
        runtime = rig.bot.runtime
        session = await runtime.parts.session_store.create_headless("cron", chat_id=ALLOWED_USER)
        await runtime.parts.mailbox.accept(
            Envelope(
                id="cron:1",
                session_id=session.id or 0,
                sender=Sender(kind=SenderKind.SYSTEM, ref="cron"),
                body=ScheduledTurnBody(job="cron", text="nightly check"),
            )
        )
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == [
            "Tool call auto-denied: this session does not support approval requests."
        ]
        assert prompts(rig) == []
        assert not (rig.workdir / "ran.txt").exists()


# --- what the prompt shows ------------------------------------------------------------------------


async def test_edit_file_prompt_shows_path_and_diff(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.workdir.mkdir(parents=True, exist_ok=True)
        (rig.workdir / "notes.md").write_text("buy milk\nbuy eggs\n")
        edit = {"path": "notes.md", "old_text": "buy eggs", "new_text": "buy bread"}
        rig.llm.script(ToolCalls([("edit_file", edit)]), Text("Edited."))
        rig.say("swap eggs for bread")
        prompt = await wait_prompt(rig)
        shown = prompt.visible_text
        assert "Change file notes.md:" in shown
        assert "--- a/notes.md\n+++ b/notes.md" in shown
        assert "-buy eggs\n+buy bread" in shown
        assert '<pre><code class="language-diff">' in (prompt.text or "")
        assert [m for m in rig.chat() if m.kind == "document"] == []
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        assert (rig.workdir / "notes.md").read_text() == "buy milk\nbuy bread\n"


async def test_a_long_diff_is_cut_and_attached_as_a_document(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        content = "".join(f"line {i}: {'x' * 60}\n" for i in range(200))
        rig.llm.script(ToolCalls([("write_file", {"path": "big.txt", "content": content})]), Text("Written."))
        rig.say("write a big file")
        prompt = await wait_prompt(rig)
        assert "(new file)" in prompt.visible_text and "cut short" in prompt.visible_text
        assert len(prompt.visible_text) <= 4096
        await rig.tg.wait_for(lambda: any(m.kind == "document" for m in rig.chat()))
        document = next(m for m in rig.chat() if m.kind == "document")
        assert document.document_filename == "change.diff"
        assert document.reply_to_message_id == prompt.message_id
        full = (document.document_content or b"").decode()
        assert full.startswith("--- a/big.txt\n+++ b/big.txt\n")
        assert f"+line 199: {'x' * 60}\n" in full
        tap(rig, prompt, "❌ Reject")
        await rig.wait_turns()
        assert not (rig.workdir / "big.txt").exists()


class DeployArgs(ToolArgs):
    service: str
    replicas: int = 1


class Deploy(Tool[DeployArgs]):
    """A tool no rule names, as an MCP server might add one later."""

    name = "mcp__ops__deploy"
    description = "Deploy a service."
    Args = DeployArgs

    async def execute(self, args: DeployArgs, ctx: ToolContext) -> str:
        return f"deployed {args.service} x{args.replicas}"


async def test_a_tool_no_rule_names_asks_and_shows_its_arguments(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.bot.runtime.parts.tools.register(Deploy())
        call = ToolCalls([("mcp__ops__deploy", {"service": "web <prod>", "replicas": 3})])
        rig.llm.script(call, Text("Deployed."))
        rig.say("deploy web")
        prompt = await wait_prompt(rig)
        assert "Call mcp__ops__deploy with:" in prompt.visible_text
        assert '"service": "web <prod>",\n  "replicas": 3' in prompt.visible_text
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["deployed web <prod> x3"]


async def test_a_long_command_is_cut_and_attached_in_full(tmp_path: Path) -> None:
    command = "\n".join(f"echo step {i} {'y' * 40}" for i in range(120))
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell(command), Text("Not run."))
        rig.say("run the long script")
        prompt = await wait_prompt(rig)
        assert "cut short" in prompt.visible_text and "echo step 0 " in prompt.visible_text
        assert "echo step 119" not in prompt.visible_text
        await rig.tg.wait_for(lambda: any(m.kind == "document" for m in rig.chat()))
        document = next(m for m in rig.chat() if m.kind == "document")
        assert (document.document_filename, document.document_content) == ("command.sh", command.encode())
        tap(rig, prompt, "❌ Reject")
        await rig.wait_turns()


async def test_several_calls_in_one_round_are_gated_one_after_another(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        calls = ToolCalls(
            [("execute_cmd", {"command": "echo first"}), ("execute_cmd", {"command": "echo second"})]
        )
        rig.llm.script(calls, Text("Both handled."))
        rig.say("run two")
        first = await wait_prompt(rig)
        assert "echo first" in first.visible_text and len(prompts(rig)) == 1
        tap(rig, first, "✅ Approve")
        second = await wait_prompt(rig, 2)
        assert "echo second" in second.visible_text
        await wait_decided(rig, first, "✅ Approved")
        tap(rig, second, "❌ Reject")
        await rig.wait_turns()
        await wait_decided(rig, second, "❌ Rejected")
        assert tool_results(rig.llm.requests[1]) == ["first\nexit code: 0", "User rejected this tool call."]


# --- timeout, /stop, /approvals, /trust ------------------------------------------------------------


async def test_an_unanswered_prompt_expires(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval={"timeout": 0.5}) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("It timed out."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        await rig.wait_turns()
        decided = await wait_decided(rig, prompt, "⌛ Expired")
        approve = as_sent(prompt).button_data("✅ Approve")  # its keyboard is gone by now
        assert decided.buttons == []
        assert tool_results(rig.llm.requests[1]) == ["Approval timed out."]
        assert not (rig.workdir / "ran.txt").exists()
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)
        assert await toast(rig) == "This request is no longer pending."


def is_prompt(params: dict[str, Any]) -> bool:
    return PROMPT in str(params.get("text"))


def request_id_of(params: dict[str, Any]) -> str:
    """The approval request a prompt's (sent or refused) ``sendMessage`` was for, from its buttons."""
    markup = params["reply_markup"]
    first = (json.loads(markup) if isinstance(markup, str) else markup)["inline_keyboard"][0][0]
    button = decode(first["callback_data"])
    assert button is not None
    return button.arg


async def test_a_prompt_hit_by_a_transient_failure_is_sent_again_and_waits(tmp_path: Path) -> None:
    """A 502 (or a timeout) is not a refusal: the prompt is retried until Telegram takes it."""
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=502, description="Bad Gateway", times=2, when=is_prompt)
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        attempts = [c.status for c in rig.tg.calls("sendMessage") if is_prompt(c.params)]
        assert attempts == [502, 502, 200]
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("✅ Approve"))
        await rig.wait_text("Done.")
        assert (rig.workdir / "ran.txt").read_text() == "hi\n"


@pytest.mark.parametrize(
    ("status", "description"),
    [(400, "Bad Request: chat not found"), (403, "Forbidden: bot was blocked by the user")],
    ids=["send-refused", "bot-blocked"],
)
async def test_a_prompt_the_chat_refuses_expires_at_once_and_the_turn_goes_on(
    tmp_path: Path, status: int, description: str
) -> None:
    """Regression: a prompt that could not be sent left its request pending, buttonless, until
    ``approval.timeout`` (unbounded by default), so the turn hung."""
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("sendMessage", status=status, description=description, when=is_prompt)
        rig.llm.script(shell("echo hi >> ran.txt"), Text("I could not ask, so I left it."))
        rig.say("run it")
        await rig.wait_turns()
        refused = [c for c in rig.tg.calls("sendMessage") if is_prompt(c.params)]
        assert [c.status for c in refused] == [status]
        assert prompts(rig) == []
        assert await rig.bot.runtime.parts.approval_manager.pending() == []
        request = await rig.bot.runtime.parts.approval_manager.get(request_id_of(refused[0].params))
        assert request is not None
        assert (request.status, request.reason) == ("expired", PROMPT_NOT_SHOWN)
        assert not (rig.workdir / "ran.txt").exists()
        assert rig.llm.calls == 2
        assert tool_results(rig.llm.requests[1]) == [f"Approval could not be asked: {PROMPT_NOT_SHOWN}."]
        notice = await rig.wait_text("couldn't show the approval request")
        assert notice.visible_text.startswith("⚠️") and "execute_cmd" in notice.visible_text
        await rig.wait_text("I could not ask, so I left it.")


async def test_stop_cancels_a_pending_prompt(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        approve = prompt.button_data("✅ Approve")
        rig.say("/stop")
        decided = await wait_decided(rig, prompt, "⏹ Cancelled")
        assert decided.buttons == []
        await rig.wait_text("Stopped")
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, approve, require_button=False)
        assert await toast(rig) == "This request is no longer pending."
        assert not (rig.workdir / "ran.txt").exists()
        assert rig.llm.calls == 1


async def test_approvals_lists_pending_requests_as_replies_to_their_prompts(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/approvals")
        await rig.wait_text("Nothing is waiting")
        rig.llm.script(shell("echo hi"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        rig.say("/approvals")
        await rig.wait_text("Waiting for your approval")
        entry = await rig.wait_text("⏳")
        assert "execute_cmd" in entry.visible_text and "echo hi" in entry.visible_text
        assert entry.reply_to_message_id == prompt.message_id
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()


async def test_trust_lists_bypasses_and_rules_and_revokes_them(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/trust")
        await rig.wait_text("no standing permissions")
        write = ToolCalls([("write_file", {"path": "notes.md", "content": "milk"})])
        rig.llm.script(shell("echo one"), Text("one"), write, Text("two"), shell("echo three"), Text("three"))
        rig.say("first")
        tap(rig, await wait_prompt(rig), "⏱ 15 min")
        await rig.wait_turns()
        rig.say("second")
        tap(rig, await wait_prompt(rig, 2), "🔁 Always")
        confirm = await rig.wait_text("without asking?")
        rig.tg.press_button_labeled(ALLOWED_USER, confirm.message_id, "✅ Yes")
        await rig.wait_turns(2)
        rig.say("/trust")
        bypass = await rig.wait_text("⏱ shell commands — no approval asked until ")
        assert bypass.visible_text.endswith("(Europe/Berlin)"), "the time carries its zone"
        rule = await rig.wait_text("🔁 write_file notes.md")
        rig.tg.press_button_labeled(ALLOWED_USER, bypass.message_id, "Revoke")
        rig.tg.press_button_labeled(ALLOWED_USER, rule.message_id, "Revoke")
        await toast(rig, 5)
        assert [a.text for a in rig.tg.callback_answers[3:]] == ["Permission revoked.", "Permission revoked."]
        await rig.tg.wait_for(lambda: rig.tg.message(ALLOWED_USER, rule.message_id).buttons == [])
        assert rig.tg.message(ALLOWED_USER, bypass.message_id).buttons == []
        assert [r for r in rig.bot.runtime.parts.approval_manager.rules() if r.origin == "user"] == []
        rig.say("third")
        third = await wait_prompt(rig, 3)
        assert "echo three" in third.visible_text
        tap(rig, third, "✅ Approve")
        await rig.wait_turns(3)
