"""How the runtime's values read in a chat: times with their zone, spans and schedules per
locale, schedule errors in the user's language, bypass scopes, the no-op diff, the menu.

Regressions: "Every: every 30m", "Интервал: every 45m", times without a zone, English
error details for a Russian user, an empty diff for a ``write_file`` that changes nothing,
a "⏱ 15 min" popup that did not say what it covered, an English-only command menu.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from agentgram.bot.telegram.handlers.commands import MENU, menu
from agentgram.bot.telegram.views.prompts import approval_prompt
from agentgram.bot.telegram.views.wording import (
    local_time,
    schedule_error,
    schedule_text,
    scope_text,
    span_text,
)
from agentgram.runtime.infra.events import ApprovalDetails
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.scheduler.schedule import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    ScheduleError,
    parse_schedule,
)

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # Friday 13:00 in Berlin


@pytest.fixture(scope="module")
def t() -> Translator:
    return Translator()


def test_times_carry_their_zone(t: Translator) -> None:
    assert local_time(t, "en", NOW, BERLIN) == "2026-03-27 13:00 (Europe/Berlin)"
    assert local_time(t, "ru", NOW, BERLIN, date=False) == "13:00 (Europe/Berlin)"
    assert local_time(t, "en", NOW) == "2026-03-27 12:00 (UTC)"


@pytest.mark.parametrize(
    ("seconds", "en", "ru"),
    [
        (2700, "45 min", "45 мин"),
        (5400, "1 h 30 min", "1 ч 30 мин"),
        (90, "1 min 30 s", "1 мин 30 с"),
        (86400 * 2, "2 d", "2 дн."),
        (0.5, "0 s", "0 с"),
    ],
)
def test_spans_per_locale(t: Translator, seconds: float, en: str, ru: str) -> None:
    assert (span_text(t, "en", seconds), span_text(t, "ru", seconds)) == (en, ru)


def test_schedules_per_locale(t: Translator) -> None:
    every = IntervalSchedule(2700)
    assert schedule_text(t, "en", every, BERLIN) == "every 45 min"
    assert schedule_text(t, "ru", every, BERLIN) == "каждые 45 мин"
    cron = CronSchedule("0 9 * * 1-5")
    assert schedule_text(t, "en", cron, BERLIN) == "<code>0 9 * * 1-5</code> (cron, Europe/Berlin)"
    once = OnceSchedule(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    assert schedule_text(t, "en", once, BERLIN) == "once, 2026-12-01 09:00 (Europe/Berlin)"
    assert schedule_text(t, "ru", once, BERLIN) == "один раз, 2026-12-01 09:00 (Europe/Berlin)"


def _error(text: str) -> ScheduleError:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(text, BERLIN, NOW)
    return raised.value


def test_schedule_errors_in_the_users_language(t: Translator) -> None:
    frequent = _error("every 10s")
    assert schedule_error(t, "en", frequent) == (
        "<code>every 10s</code> is too often — the shortest interval is 1 min."
    )
    assert schedule_error(t, "ru", frequent) == (
        "<code>every 10s</code> — слишком часто: самый короткий интервал — 1 мин."
    )
    past = schedule_error(t, "en", _error("at 2026-03-27 09:00"))
    assert (
        past
        == "<code>at 2026-03-27 09:00</code> is in the past (it is now 2026-03-27 13:00 (Europe/Berlin))."
    )
    assert "а здесь 1" in schedule_error(t, "ru", _error("whenever"))


def test_schedule_error_text_from_the_user_is_escaped(t: Translator) -> None:
    assert "<code>every &lt;b&gt;</code>" in schedule_error(t, "en", _error("every <b>"))


@pytest.mark.parametrize(
    ("scope", "en", "ru"),
    [
        ("@shell", "shell commands", "команды оболочки"),
        ("@fs_write", "file changes", "изменения файлов"),
        ("all", "anything", "что угодно"),
        ("mcp_search", "“mcp_search” calls", "вызовы «mcp_search»"),
        ("@not_a_group", "“not_a_group” calls", "вызовы «not_a_group»"),
    ],
)
def test_bypass_scopes_are_named(t: Translator, scope: str, en: str, ru: str) -> None:
    assert (scope_text(t, "en", scope), scope_text(t, "ru", scope)) == (en, ru)


def test_the_15_min_popup_names_what_it_covers(t: Translator) -> None:
    popup = t.t("en", "trust-bypass-on", minutes=15, scope=scope_text(t, "en", "@shell"))
    assert popup == "⏱ I won't ask about shell commands for 15 min."


def _file_prompt(t: Translator, lang: str, *, diff: str, new_file: bool = False) -> str:
    details = ApprovalDetails(
        tool_name="write_file", arguments={}, path="notes.md", diff=diff, new_file=new_file
    )
    return approval_prompt(t, lang, "r1", details).html


def test_a_write_that_changes_nothing_says_so(t: Translator) -> None:
    html = _file_prompt(t, "en", diff="")
    assert "(no change: the file already has exactly this content)" in html and "<pre>" not in html
    assert "без изменений" in _file_prompt(t, "ru", diff="")
    assert "(an empty file)" in _file_prompt(t, "en", diff="", new_file=True)
    assert "<pre>" in _file_prompt(t, "en", diff="--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-a\n+b\n")


def test_the_menu_is_registered_per_language(t: Translator) -> None:
    menus = menu(t)
    assert set(menus) == {None, "ru"}
    assert [c.command for c in menus[None]] == [c.command for c in menus["ru"]] == list(MENU)
    assert menus[None][0].description == "Start a fresh conversation"
    assert menus["ru"][0].description == "Начать разговор заново"
    assert all(1 <= len(c.description) <= 256 for commands in menus.values() for c in commands)


def _read_prompt(t: Translator, lang: str, tool: str, path: str, *, outside: bool = True) -> str:
    details = ApprovalDetails(tool_name=tool, arguments={"path": path}, read_path=path, outside=outside)
    return approval_prompt(t, lang, "r1", details).body


def test_a_read_outside_the_workdir_is_asked_in_words(t: Translator) -> None:
    """Regression (issue 25): ``Call read_file with: { "path": "/etc/hostname" }``."""
    body = _read_prompt(t, "en", "read_file", "/etc/hostname")
    assert body.splitlines()[1:] == ["Read a file outside the workdir: <code>/etc/hostname</code>"]
    assert _read_prompt(t, "en", "list_dir", "/etc").endswith(
        "List a folder outside the workdir: <code>/etc</code>"
    )
    assert _read_prompt(t, "en", "send_file", "/tmp/r.pdf").endswith(
        "Send you a file from outside the workdir: <code>/tmp/r.pdf</code>"
    )
    assert _read_prompt(t, "en", "read_file", "notes.md", outside=False).endswith(
        "Read a file: <code>notes.md</code>"
    )
    generic = _read_prompt(t, "en", "peek", "/etc/x&y")
    assert generic.endswith("Read outside the workdir with <code>peek</code>: <code>/etc/x&amp;y</code>")
    assert _read_prompt(t, "ru", "read_file", "/etc/hostname").endswith(
        "Прочитать файл вне рабочей папки: <code>/etc/hostname</code>"
    )


@pytest.mark.parametrize("lang", Translator().languages())
@pytest.mark.parametrize("tool", ["read_file", "list_dir", "send_file", "peek"])
def test_every_locale_words_a_read(t: Translator, lang: str, tool: str) -> None:
    outside, inside = (_read_prompt(t, lang, tool, "/etc/hostname", outside=o) for o in (True, False))
    for body in (outside, inside):
        assert "<code>/etc/hostname</code>" in body and "{" not in body and "<pre>" not in body
    assert outside != inside
