"""Reports worded and rendered for Telegram (:mod:`bot.telegram.reports`), in English and Russian.

The runtime hands over what a report is (a cron result, a tic's report, the
quiet-hours digest); these pin down what the chat is shown for each.
"""

from __future__ import annotations

import pytest

from agentgram.bot.telegram.views.reports import report_html, report_markdown, report_title
from agentgram.runtime.infra.events import CronResult, Digest, LocaleText, ModelText, TicResult
from agentgram.runtime.infra.i18n import Translator


@pytest.fixture
def t() -> Translator:
    return Translator(default="en")


def test_a_cron_result_is_titled_with_the_job_and_shows_the_model_text(t: Translator) -> None:
    result = CronResult(title="Inbox", body=ModelText(text="2 **new** mails."))
    assert report_title(t, "en", result) == "⏰ Inbox"
    assert report_markdown(t, "en", result) == "2 **new** mails."
    assert report_html(t, "en", result) == "<b>⏰ Inbox</b>\n\n2 <b>new</b> mails."


@pytest.mark.parametrize(
    ("language", "title", "text"),
    [
        ("en", "⏰ Inbox", "(no output)"),
        ("ru", "⏰ Inbox", "(пусто)"),
    ],
)
def test_a_cron_result_without_output_is_worded_by_the_locale(
    t: Translator, language: str, title: str, text: str
) -> None:
    result = CronResult(title="Inbox", body=LocaleText(key="cron-no-output"))
    assert (report_title(t, language, result), report_markdown(t, language, result)) == (title, text)


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("en", "⚠️ I made 20 tool calls in a row without reaching an answer, so I stopped."),
        ("ru", "⚠️ Лимит шагов (20) исчерпан, а к ответу я так и не пришёл — поэтому остановился."),
    ],
)
def test_a_failed_run_is_worded_with_its_parameters(t: Translator, language: str, text: str) -> None:
    result = CronResult(title="Inbox", body=LocaleText(key="turn-exhausted", params={"rounds": 20}))
    assert report_markdown(t, language, result).startswith(text)


@pytest.mark.parametrize(("language", "title"), [("en", "🕰 Check-in"), ("ru", "🕰 Регулярная проверка")])
def test_a_tic_report_has_the_check_in_title(t: Translator, language: str, title: str) -> None:
    report = TicResult(body=ModelText(text="The nightly backup did not run."))
    assert report_html(t, language, report) == f"<b>{title}</b>\n\nThe nightly backup did not run."


def test_held_digest_lists_results_oldest_first(t: Translator) -> None:
    digest = Digest(
        items=(
            CronResult(title="Inbox", body=ModelText(text="2 new")),
            CronResult(title="Backup", body=ModelText(text="ok")),
        )
    )
    assert report_title(t, "en", digest) == "🌙 While you were away (2)"
    assert report_markdown(t, "en", digest) == "**⏰ Inbox**\n2 new\n\n**⏰ Backup**\nok"
    assert report_html(t, "en", digest) == (
        "<b>🌙 While you were away (2)</b>\n\n<b>⏰ Inbox</b>\n2 new\n\n<b>⏰ Backup</b>\nok"
    )


def test_a_russian_digest_words_every_item_in_russian(t: Translator) -> None:
    digest = Digest(items=(CronResult(title="Почта", body=LocaleText(key="cron-no-output")),))
    assert report_title(t, "ru", digest) == "🌙 Пока вы отдыхали (1)"
    assert report_markdown(t, "ru", digest) == "**⏰ Почта**\n(пусто)"


def test_a_job_title_is_escaped_in_the_title_line(t: Translator) -> None:
    result = CronResult(title="<b>x</b> & y", body=ModelText(text="ok"))
    assert report_html(t, "en", result).startswith("<b>⏰ &lt;b&gt;x&lt;/b&gt; &amp; y</b>\n\n")
