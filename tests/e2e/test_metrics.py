"""``/metrics`` counters move after a turn (issue 17 §5), read from the exposition text.

The real bot runs between the fakes; each test reads :func:`runtime.metrics.render` before
and after and checks the deltas (the registry is the process's, so earlier tests' counts stay
in it; only deltas are asserted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from agentgram.runtime.infra.metrics import render
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import shell, tap, wait_prompt
from tests.fakes.openai_server import Text

Key = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Scrape:
    """One scrape of ``/metrics``: every sample by name and labels."""

    samples: dict[Key, float]

    @classmethod
    def now(cls) -> Scrape:
        text, _ = render()
        return cls(
            {
                (sample.name, frozenset(sample.labels.items())): sample.value
                for family in text_string_to_metric_families(text.decode())
                for sample in family.samples
            }
        )

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def since(self, before: Scrape, name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)


def sent_ok(rig: Rig) -> int:
    return sum(1 for call in rig.tg.calls("sendMessage") if call.status == 200)


async def test_a_turn_with_an_approved_tool_call_moves_the_counters(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        before, sent_before = Scrape.now(), sent_ok(rig)
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        assert Scrape.now().value("agentgram_sessions_active") == 1  # waiting for the user
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns()
        after = Scrape.now()

        assert after.since(before, "agentgram_turns_total", outcome="final") == 1
        assert after.since(before, "agentgram_turn_rounds_count") == 1
        assert after.since(before, "agentgram_turn_rounds_sum") == 2
        assert after.since(before, "agentgram_tool_calls_total", tool="execute_cmd", status="done") == 1
        assert (
            after.since(before, "agentgram_approval_decisions_total", decision="approved", how="button") == 1
        )
        assert after.value("agentgram_sessions_active") == 0
        model = {"model": "main-model"}
        assert after.since(before, "agentgram_llm_request_duration_seconds_count", **model) == 2
        assert after.since(before, "agentgram_llm_time_to_first_token_seconds_count", **model) == 2
        assert after.since(before, "agentgram_llm_tokens_total", kind="prompt", **model) == 2 * 10
        assert after.since(before, "agentgram_llm_tokens_total", kind="completion", **model) == 2 * 5
        assert after.since(before, "agentgram_mail_accepted_total", kind="user_message") == 1
        assert after.since(before, "agentgram_mail_accepted_total", kind="approval_decision") == 1
        calls = after.since(before, "agentgram_telegram_api_calls_total", method="sendMessage", result="ok")
        assert calls == sent_ok(rig) - sent_before >= 2  # the prompt and the answer, at least
        assert after.value("agentgram_telegram_outbox_depth") == 0


async def test_trust_for_a_while_and_always_count_as_trust(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        before = Scrape.now()
        rig.llm.script(shell("echo hello one"), Text("one"), shell("echo 2"), Text("two"))
        rig.llm.script(shell("echo 3"), Text("three"))
        rig.say("first")
        tap(rig, await wait_prompt(rig), "🔁 Always")
        confirm = await rig.wait_text("without asking?")
        rig.tg.press_button_labeled(ALLOWED_USER, confirm.message_id, "✅ Yes")
        await rig.wait_turns()
        rig.say("second")  # not what the saved rule allows: asked
        tap(rig, await wait_prompt(rig, 2), "⏱ 15 min")
        await rig.wait_turns(2)
        rig.say("third")  # the bypass lets it through: a rule's approval, no prompt
        await rig.wait_turns(3)
        after = Scrape.now()
        assert after.since(before, "agentgram_approval_trust_total", kind="session") == 1
        assert after.since(before, "agentgram_approval_trust_total", kind="always") == 1
        assert (
            after.since(before, "agentgram_approval_decisions_total", decision="approved", how="button") == 2
        )
        assert after.since(before, "agentgram_approval_decisions_total", decision="approved", how="rule") == 1
        assert after.since(before, "agentgram_tool_calls_total", tool="execute_cmd", status="done") == 3


async def test_polling_lag_is_the_time_since_getupdates_last_answered(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        answered = len(rig.tg.calls("getUpdates"))
        await rig.tg.wait_for(lambda: len(rig.tg.calls("getUpdates")) > answered + 1)  # one answered since
        lag = Scrape.now().value("agentgram_telegram_polling_lag_seconds")
        assert not math.isnan(lag) and 0 <= lag < 2  # poll_timeout is 1 s in the tests
        assert Scrape.now().value("agentgram_telegram_api_calls_total", method="getUpdates", result="ok") > 0


def says(needle: str):  # type: ignore[no-untyped-def]
    return lambda params: needle in str(params.get("text"))


WHOLE = {"stream_first_delay": 5}
"""A quick reply goes out once, whole, as one sendMessage (as in test_delivery_faults)."""


async def test_5xx_answers_count_as_5xx_calls_and_retries(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=WHOLE) as rig:
        before = Scrape.now()
        rig.tg.fail_next("sendMessage", status=502, times=3, when=says("The answer"))
        rig.llm.script(Text("The answer is 42."))
        rig.say("question")
        await rig.tg.wait_for(lambda: Scrape.now().value("agentgram_telegram_outbox_depth") >= 1)
        await rig.wait_text("The answer is 42.", timeout=10)
        await rig.wait_turns()
        after = Scrape.now()
        assert (
            after.since(before, "agentgram_telegram_api_calls_total", method="sendMessage", result="5xx") == 3
        )
        assert after.since(before, "agentgram_telegram_send_retries_total") == 3
        assert after.value("agentgram_telegram_outbox_depth") == 0


async def test_a_429_counts_as_a_429_call_and_a_retry(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={**WHOLE, "max_retries": 0}) as rig:
        before = Scrape.now()
        rig.tg.fail_next("sendMessage", status=429, retry_after=1, when=says("Patience"))
        rig.llm.script(Text("Patience pays."))
        rig.say("question")
        await rig.wait_text("Patience pays.", timeout=10)
        await rig.wait_turns()
        after = Scrape.now()
        assert (
            after.since(before, "agentgram_telegram_api_calls_total", method="sendMessage", result="429") == 1
        )
        assert after.since(before, "agentgram_telegram_send_retries_total") == 1
