"""Locale files stay complete and well-formed; Translator's lookup and fallback rule.

The completeness tests read the real ``locales/`` directory, so adding a key to
one language without the others fails here with the list of what is missing.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from fluent.runtime import FluentBundle, FluentResource
from fluent.syntax import FluentParser, ast
from fluent.syntax.visitor import Visitor

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.i18n import DEFAULT_LOCALES_DIR, Translator
from tests.fakes.telegram_html import parse_html

ISOLATION_MARKS = ("\u2066", "\u2067", "\u2068", "\u2069")

# Keys the bot's handlers rely on; each must exist in every locale.
REQUIRED_KEYS = {
    "start-greeting", "help-text", "not-allowed", "group-not-enabled", "unsupported-content",
    "unknown-command", "new-session", "stopped", "stopped-dropped", "nothing-to-stop", "paused",
    "resumed", "nothing-to-resume", "noted-busy", "mailbox-full", "restarted-continuing",
    "model-fallback", "llm-error", "turn-exhausted", "turn-failed", "approval-title",
    "approval-command", "approval-file", "approval-new-file", "approval-diff-cut", "approval-args",
    "btn-approve", "btn-reject", "btn-trust-15", "btn-trust-always", "approval-approved",
    "approval-rejected", "approval-rejected-reason", "approval-cancelled", "approval-expired",
    "approval-not-shown", "approval-stale", "approval-not-yours", "approval-unknown-button",
    "approval-reply-hint", "approvals-none", "approvals-list-header", "trust-none", "trust-header",
    "trust-revoked", "trust-always-confirm", "trust-bypass-on", "tic-report-header", "tic-status",
    "tic-on", "tic-off", "tic-interval-set", "tic-started", "cron-result-title", "cron-no-output",
    "cron-failed", "cron-list-header", "cron-none", "cron-added", "cron-bad-schedule", "cron-killed",
    "cron-not-running", "cron-deleted", "cron-paused", "cron-resumed", "cron-confirm-delete",
    "btn-run-now", "btn-pause", "btn-resume", "btn-delete", "btn-confirm", "btn-cancel",
    "quiet-hours-digest-header", "llm-unavailable", "llm-timeout", "llm-rate-limited",
    "llm-auth-failed", "llm-model-not-found", "llm-context-too-long", "llm-bad-request",
    "llm-unreachable", "llm-stream-cut", "pairing-asked", "pairing-request", "pairing-request-approved",
    "pairing-request-denied", "pairing-welcome", "pairing-refused", "btn-deny",
}  # fmt: skip

SAMPLE_PARAMS: dict[str, str | int] = {
    "count": 3, "rounds": 20, "minutes": 15, "step": 2,
    "failed": "gpt-main", "next": "gpt-backup", "error": "timeout", "workdir": "/home/agent",
    "path": "notes/todo.md", "tool": "execute_cmd", "reason": "not now", "rule": "execute_cmd ls *",
    "enabled": "on", "interval": "30 min", "last": "never", "title": "Weather", "id": "7",
    "until": "18:30", "status": 500, "model": "gpt-main",
    "when": "2026-03-27 13:00", "result": "reported", "state": "⏰", "schedule": "<code>every 2h</code>",
    "user": "@ann", "code": "K7Q2XP", "web": "on", "outside": "yes",
    "scope": "shell commands", "file": "report.pdf", "spec": "every 10s", "names": "@daily, @hourly",
    "value": "blue moon", "shortest": "1 min", "time": "2026-03-29 02:30", "zone": "Europe/Berlin",
    "now": "2026-03-27 13:00 (Europe/Berlin)", "expr": "0 9 * * 1-5", "span": "45 min",
    "parent": "main", "agent": "researcher",
    "tokens": 61250, "how": "as the model reported", "messages": 84, "threshold": 64000, "keep": 6,
    "rows": 412, "made": "2026-03-02 18:41 (Europe/Berlin)", "words": "staging port",
    "question": "Which port?", "answer": "<b>6543</b>",
    "name": "smart", "details": "tools, vision · 2.5 / 10 per 1M tokens", "input": 1200, "output": 340,
    "cost": "0.0123",
    "command": "<code>pytest -x</code>", "elapsed": "2 min 10 s", "number": 1,
    "text": "buy milk on the way home", "limit": 20, "emoji": "👍", "kind": "video",
    "description": "Fill in PDF forms.",
    "url": "https://agent.example.org/sessions/7",
    "summary": "$ ls -la",
    "caption": "the weekly report",
    "place": "Team › Ideas", "item": "• Team › Ideas · session 7",
    "files": 3, "added": 12, "removed": 4, "ids": "7, 8",
}  # fmt: skip


class _Variables(Visitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_VariableReference(self, node: ast.VariableReference) -> None:
        self.names.add(node.id.name)


def _variables_by_key(lang: str) -> dict[str, set[str]]:
    """``{key: {$variable, …}}`` read straight from the locale's .ftl files."""
    out: dict[str, set[str]] = {}
    for path in sorted((DEFAULT_LOCALES_DIR / lang).glob("*.ftl")):
        for entry in FluentParser().parse(path.read_text(encoding="utf-8")).body:
            if isinstance(entry, ast.Message):
                visitor = _Variables()
                visitor.visit(entry)
                out[entry.id.name] = visitor.names
    return out


@pytest.fixture(scope="module")
def tr() -> Translator:
    return Translator()


def _write(root: Path, lang: str, text: str) -> None:
    (root / lang).mkdir(parents=True, exist_ok=True)
    (root / lang / "agentgram.ftl").write_text(text, encoding="utf-8")


# --- the real locale files ----------------------------------------------------


def test_english_and_russian_are_shipped(tr: Translator) -> None:
    assert {"en", "ru"} <= set(tr.languages())


def test_every_key_present_in_every_locale(tr: Translator) -> None:
    every_key = REQUIRED_KEYS.union(*(tr.keys(lang) for lang in tr.languages()))
    missing = {lang: sorted(every_key - tr.keys(lang)) for lang in tr.languages()}
    missing = {lang: keys for lang, keys in missing.items() if keys}
    assert not missing, "keys missing per language (add them to locales/<lang>/*.ftl):\n" + "\n".join(
        f"  {lang}: {', '.join(keys)}" for lang, keys in sorted(missing.items())
    )


def test_translations_use_the_same_parameters_as_default(tr: Translator) -> None:
    reference = _variables_by_key(tr.default)
    mismatched = [
        f"{lang}/{key}: {sorted(names)} != {sorted(reference[key])}"
        for lang in tr.languages()
        for key, names in _variables_by_key(lang).items()
        if key in reference and names != reference[key]
    ]
    assert not mismatched, "parameters differ from the default locale:\n" + "\n".join(mismatched)


def test_every_message_formats_cleanly_as_telegram_html(
    tr: Translator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentgram.i18n")
    for lang in tr.languages():
        for key, names in _variables_by_key(lang).items():
            unknown = names - SAMPLE_PARAMS.keys()
            assert not unknown, f"{lang}/{key}: add a sample for {sorted(unknown)} to SAMPLE_PARAMS"
            text = tr.t(lang, key, **SAMPLE_PARAMS)
            assert text and text != key, f"{lang}/{key} formatted to nothing"
            assert "{" not in text, f"{lang}/{key} left a placeable unresolved: {text!r}"
            assert not any(mark in text for mark in ISOLATION_MARKS), f"{lang}/{key} has isolation marks"
            parse_html(text)  # raises with Telegram's own error text if the HTML is invalid
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_parameters_are_inserted_verbatim_without_isolation_marks(tr: Translator) -> None:
    assert tr.t("en", "approval-command", workdir="/srv/work") == "Run a command in <code>/srv/work</code>:"
    assert tr.t("ru", "cron-result-title", title="Погода") == "⏰ Погода"


@pytest.mark.parametrize(
    ("lang", "count", "expected"),
    [
        ("en", 1, "1 queued message was dropped."),
        ("en", 5, "5 queued messages were dropped."),
        ("ru", 1, "Отброшено 1 сообщение из очереди."),
        ("ru", 3, "Отброшено 3 сообщения из очереди."),
        ("ru", 5, "Отброшено 5 сообщений из очереди."),
        ("ru", 21, "Отброшено 21 сообщение из очереди."),
    ],
)
def test_stopped_dropped_uses_plural_forms(tr: Translator, lang: str, count: int, expected: str) -> None:
    assert tr.t(lang, "stopped-dropped", count=count).endswith(expected)


def test_russian_is_actually_russian(tr: Translator) -> None:
    for key in ("start-greeting", "help-text", "stopped", "approval-title"):
        assert tr.t("ru", key) != tr.t("en", key), key


# --- resolve ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ru", "ru"), ("ru-RU", "ru"), ("RU", "ru"), ("ru_RU", "ru"), ("en-US", "en"), ("en", "en"),
        ("de", "en"), ("zh-hans", "en"), ("", "en"), (None, "en"),
    ],
)  # fmt: skip
def test_resolve_maps_telegram_language_codes(tr: Translator, code: str | None, expected: str) -> None:
    assert tr.resolve(code) == expected


def test_resolve_prefers_an_exact_regional_locale(tmp_path: Path) -> None:
    _write(tmp_path, "en", "hi = Hi\n")
    _write(tmp_path, "pt", "hi = Olá\n")
    _write(tmp_path, "pt-BR", "hi = Oi\n")
    tr = Translator(tmp_path)
    assert tr.resolve("pt-br") == "pt-BR"
    assert tr.resolve("pt-PT") == "pt"


def test_t_accepts_raw_language_codes(tr: Translator) -> None:
    assert tr.t("ru-RU", "stopped") == tr.t("ru", "stopped")
    assert tr.t(None, "stopped") == tr.t("en", "stopped") == "⏹ Stopped."


# --- fallback -----------------------------------------------------------------


def test_key_missing_in_language_falls_back_to_default(tmp_path: Path) -> None:
    _write(tmp_path, "en", "only-en = Only in English, { $name }\nboth = Both\n")
    _write(tmp_path, "ru", "both = Оба\n")
    tr = Translator(tmp_path)
    assert tr.t("ru", "both") == "Оба"
    assert tr.t("ru", "only-en", name="Ann") == "Only in English, Ann"


def test_default_language_is_configurable(tmp_path: Path) -> None:
    _write(tmp_path, "en", "hi = Hi\n")
    _write(tmp_path, "ru", "hi = Привет\nru-only = Только\n")
    tr = Translator(tmp_path, default="ru")
    assert tr.resolve("fr") == "ru"
    assert tr.t("fr", "hi") == "Привет"
    assert tr.t("en", "ru-only") == "Только"


def test_unknown_key_returns_the_key_and_warns_once(tr: Translator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentgram.i18n")
    assert tr.t("ru", "no-such-key-anywhere") == "no-such-key-anywhere"
    assert tr.t("en", "no-such-key-anywhere", count=1) == "no-such-key-anywhere"
    warnings = [r for r in caplog.records if "no-such-key-anywhere" in r.getMessage()]
    assert len(warnings) == 1


def test_missing_parameter_keeps_text_and_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(tmp_path, "en", "greet = Hello, { $name }!\n")
    caplog.set_level(logging.WARNING, logger="agentgram.i18n")
    assert Translator(tmp_path).t("en", "greet") == "Hello, name!"
    assert any("greet" in r.getMessage() for r in caplog.records)


def test_keys_lists_messages_not_terms(tmp_path: Path) -> None:
    _write(tmp_path, "en", "-brand = agentgram\nhello = Hi from { -brand }\n")
    tr = Translator(tmp_path)
    assert tr.keys("en") == {"hello"}
    assert tr.t("en", "hello") == "Hi from agentgram"


# --- broken locale directories fail at start-up -------------------------------


def test_malformed_ftl_is_a_config_error(tmp_path: Path) -> None:
    _write(tmp_path, "en", "good = fine\nbad = { $unclosed\n")
    for _ in range(2):  # the second translator, whose files are parsed already, too
        with pytest.raises(ConfigError, match="cannot parse"):
            Translator(tmp_path)


def test_a_file_edited_between_two_translators_is_read_anew(tmp_path: Path) -> None:
    """A file is parsed once per text (issue 31: ``run`` makes two translators), never per path."""
    _write(tmp_path, "en", "hello = Hi\n")
    assert Translator(tmp_path).t("en", "hello") == "Hi"
    _write(tmp_path, "en", "hello = Hello\n")
    assert Translator(tmp_path).t("en", "hello") == "Hello"


def test_a_languages_locale_data_is_loaded_when_a_message_with_a_placeable_needs_it() -> None:
    """Babel's data for a language (≈ 1.4 MiB for Russian, ≈ 3.9 MiB for English with the root
    locale) stays out of a process until a message with a placeable is formatted in it (issue 31):
    not for the command menus, not for plain notices. Every file is still checked at start. In a
    process of its own: Babel caches a locale's data for good."""
    script = (
        "import babel.localedata as data\n"
        "from agentgram.bot.telegram.handlers.commands import menu\n"
        "from agentgram.runtime.infra.i18n import Translator\n"
        "tr = Translator()\n"
        "menus = menu(tr)\n"
        "print(sorted(menus, key=str), tr.t('ru', 'nothing-to-stop'), sorted(data._cache))\n"
        "print(tr.t('ru', 'stopped-dropped', count=2), sorted(data._cache))\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout.splitlines() == [
        "[None, 'ru'] Останавливать нечего — я ничем не занят. []",
        "⏹ Остановлено. Отброшено 2 сообщения из очереди. ['root', 'ru']",
    ]


def test_a_message_reads_as_fluent_formats_it(tr: Translator) -> None:
    """A plain message is read from the parsed tree, without a bundle: the same text as Fluent's."""
    compared = 0
    for lang in tr.languages():
        bundle = FluentBundle([lang], use_isolating=False)
        for path in sorted((DEFAULT_LOCALES_DIR / lang).glob("*.ftl")):
            bundle.add_resource(FluentResource(path.read_text(encoding="utf-8")))
        for key in sorted(tr.keys(lang)):
            value = bundle.get_message(key).value
            if value is None:
                continue
            expected, errors = bundle.format_pattern(value, {})
            if not errors:
                assert tr.t(lang, key) == expected, (lang, key)
                compared += 1
    assert compared > 200


def test_duplicate_key_is_a_config_error(tmp_path: Path) -> None:
    _write(tmp_path, "en", "dup = one\ndup = two\n")
    with pytest.raises(ConfigError, match="duplicate"):
        Translator(tmp_path)


def test_missing_default_language_is_a_config_error(tmp_path: Path) -> None:
    _write(tmp_path, "ru", "hi = Привет\n")
    with pytest.raises(ConfigError, match=r"locale\.default"):
        Translator(tmp_path)
