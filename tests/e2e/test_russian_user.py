"""A Russian-speaking user reads no English: every reply, card, toast and the menu are Russian.

One long conversation (``language_code="ru"``) walks the surfaces that have leaked English
before — /help, /cron (list, ``add`` without arguments, ``add``, bad schedules, run, pause,
delete with its confirmation, a stale card), /tic (status, intervals, a refused one),
approval prompts and their decisions, ⏱ 15 min and /trust, stale and unknown buttons, a
no-op ``write_file``, a failed cron run, a document with a caption — and then checks
everything the user saw with :func:`english_in`.

How the check works. The vocabulary of English is taken from the English locale itself,
so a new English string is covered the day it is added:

* the literal text of every ``locales/en`` message (all variants; placeables, HTML tags
  and entities dropped) is split into words — tokens of Latin letters only, so identifiers
  like ``execute_cmd``, ``report.pdf`` or ``Europe/Berlin`` are not words;
* the same is done for ``locales/ru``: whatever the Russian locale itself contains (command
  syntax such as ``/tic every 45m``, ``cron``, ``HTTP``) is allowed;
* text fails if it holds an English-only word of three or more letters, or any run of three
  consecutive English-only-locale words (a phrase such as "is no longer" or "I won't ask"
  that the Russian locale never says).

The test content the user and the scripted model write is Russian, so anything English the
check finds came from the bot. The check itself is tested on known strings below, so a
vocabulary that came out empty cannot pass by accident.
"""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path

from fluent.syntax import FluentParser, ast
from fluent.syntax.visitor import Visitor

from agentgram.runtime.infra.i18n import DEFAULT_LOCALES_DIR
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import wait_prompt
from tests.e2e.test_schedule import card, listed, runs, tap, toast, until
from tests.fakes.openai_server import Error, Text, ToolCalls

RU = "ru"
PROMPT = "Нужно ваше подтверждение"
_TAG = re.compile(r"<[^>]*>")
_TOKEN = re.compile(r"[^\s,;:!?()«»“”\"—–…]+")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


class _Text(Visitor):
    """The literal text of a Fluent message, variants included, placeables left out."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def visit_TextElement(self, node: ast.TextElement) -> None:
        self.parts.append(node.value)


def _locale_texts(lang: str) -> list[str]:
    texts = []
    for path in sorted((DEFAULT_LOCALES_DIR / lang).glob("*.ftl")):
        for entry in FluentParser().parse(path.read_text(encoding="utf-8")).body:
            if isinstance(entry, ast.Message | ast.Term):
                visitor = _Text()
                visitor.visit(entry)
                texts.extend(visitor.parts)
    return texts


def words(text: str) -> list[str]:
    """The words of ``text`` in order: tokens made of Latin letters only, lower-cased."""
    plain = html.unescape(_TAG.sub(" ", text)).lower()
    tokens = (token.strip(".'") for token in _TOKEN.findall(plain))
    return [token for token in tokens if _WORD.fullmatch(token)]


def _shingles(sequence: list[str]) -> set[tuple[str, str, str]]:
    return {(a, b, c) for a, b, c in zip(sequence, sequence[1:], sequence[2:], strict=False)}


@cache
def _english() -> tuple[frozenset[str], frozenset[tuple[str, str, str]]]:
    """English-only words (≥ 3 letters) and three-word phrases: in ``en``, never in ``ru``."""
    en, ru = ([words(text) for text in _locale_texts(lang)] for lang in ("en", RU))
    ru_words = {word for text in ru for word in text}
    ru_phrases = set().union(*(_shingles(text) for text in ru))
    en_words = {word for text in en for word in text if len(word) >= 3}
    en_phrases = set().union(*(_shingles(text) for text in en))
    return frozenset(en_words - ru_words), frozenset(en_phrases - ru_phrases)


def english_in(text: str) -> list[str]:
    """What in ``text`` is English from the English locale: words, then phrases."""
    only_words, only_phrases = _english()
    found = words(text)
    hits = [word for word in found if word in only_words]
    hits += [" ".join(phrase) for phrase in _shingles(found) if phrase in only_phrases]
    return hits


def seen_by_user(rig: Rig) -> list[str]:
    """Everything the user read: each bot message in every version, each toast, the menu."""
    seen: list[str] = []
    for message in rig.tg.messages(ALLOWED_USER):
        seen += [message.visible_text, *(edit for edit in message.edits if edit)]
        seen += [label for row in message.buttons for label, _ in row]
        for markup in message.markup_edits:
            rows = (markup or {}).get("inline_keyboard") or []
            seen += [button.get("text", "") for row in rows for button in row]
    seen += [answer.text for answer in rig.tg.callback_answers if answer.text]
    seen += [description for _, description in rig.tg.my_commands(language_code=RU)]
    return seen


# --- the check itself -------------------------------------------------------------------


def test_the_check_finds_english_from_the_english_locale() -> None:
    only_words, only_phrases = _english()
    assert {"next", "run", "deleted", "task", "approval"} <= only_words
    assert ("is", "no", "longer") in only_phrases
    assert english_in("Every: every 30m") == []  # "every" is /tic syntax, in both locales
    assert english_in("Интервал: every 45m") == []
    assert english_in("⏸ Погода · 3\nNext run: —") == ["next", "run"]
    assert "is no longer" in english_in("Этот запрос is no longer pending")
    assert english_in("Интервал: 'every 10s' is too often.") == ["too", "often", "is too often"]


def test_the_check_passes_the_russian_locale_and_identifiers() -> None:
    for text in _locale_texts(RU):
        assert english_in(text) == [], text
    assert english_in("⏳ <code>execute_cmd</code>… TIC.md, Europe/Berlin, llm.base_url, HTTP 404") == []


# --- the conversation -------------------------------------------------------------------


def say(rig: Rig, text: str) -> None:
    rig.say(text, language_code=RU)


async def press(rig: Rig, message_id: int, data: str) -> str | None:
    """Press a button (present or not, as a stale client may) and return its toast."""
    count = len(rig.tg.callback_answers)
    rig.tg.press_button(ALLOWED_USER, message_id, data, require_button=False)
    return await toast(rig, count + 1)


async def test_a_russian_user_reads_no_english(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        await _commands(rig)
        await _tic(rig)  # before any cron run: a finished run would give the tic something to do
        await _cron(rig)
        await _approvals(rig)
        await _document(rig)
        await rig.bot.delivery.idle()
        leaks = {text: hits for text in seen_by_user(rig) if (hits := english_in(text))}
        assert not leaks, "English reached a Russian user:\n" + "\n".join(
            f"  {hits} in {text!r}" for text, hits in leaks.items()
        )


async def _commands(rig: Rig) -> None:
    say(rig, "/start")
    await rig.wait_text("Привет!")
    say(rig, "/help")
    await rig.wait_text("/cron — задачи по расписанию")
    say(rig, "/frobnicate")
    await rig.wait_text("Такой команды я не знаю.")
    say(rig, "/approvals")
    await rig.wait_text("Ничего не ждёт вашего подтверждения.")
    say(rig, "/trust")
    await rig.wait_text("постоянных разрешений нет")
    assert dict(rig.tg.my_commands(language_code=RU))["cron"] == "Задачи по расписанию"


async def _cron(rig: Rig) -> None:
    done = runs(rig)
    say(rig, "/cron")
    await rig.wait_text("Задач по расписанию пока нет.")
    say(rig, "/cron add")
    usage = await rig.wait_text("Чтобы запланировать задачу")
    assert "/cron add every 2h проверь сборку" in usage.visible_text
    say(rig, "/cron add every 5s спамь меня")
    refused = await rig.wait_text("слишком часто")
    assert "самый короткий интервал — 1 мин." in refused.visible_text
    say(rig, "/cron add 0 9 * сводка")
    await rig.wait_text("не расписание")
    say(rig, "/cron add every 45m полей цветы")
    added = await rig.wait_text("Задача «полей цветы»")
    assert "каждые 45 мин" in added.visible_text and "(Europe/Berlin)" in added.visible_text
    say(rig, "/cron add in 20m напомни позвонить Анне")
    await rig.wait_text("Задача «напомни позвонить Анне»")
    say(rig, "/cron")
    water = await listed(rig, "полей цветы")
    remind = await listed(rig, "напомни позвонить Анне")
    assert "один раз, " in remind.visible_text

    rig.llm.script(Text("Цветы политы."), Error(401))
    tap(rig, water, "▶️ Запустить")
    await rig.wait_text("Цветы политы.")
    await until(rig, lambda: len(done) == 1)
    tap(rig, remind, "▶️ Запустить")
    await rig.wait_text("отклонил API-ключ")
    await until(rig, lambda: len(done) == 2)
    tap(rig, water, "⏸ Пауза")
    await rig.tg.wait_for(lambda: "Приостановлена." in card(rig, water).visible_text)
    tap(rig, card(rig, water), "🗑 Удалить")
    await rig.tg.wait_for(lambda: "Удалить задачу «полей цветы»" in card(rig, water).visible_text)
    tap(rig, card(rig, water), "✅ Да")
    await rig.tg.wait_for(lambda: card(rig, water).visible_text == "🗑 Удалена: полей цветы")
    say(rig, "/cron")
    await rig.wait_text("Выполнена: запусков больше не будет.")
    assert await press(rig, water.message_id, "ag1:cr:1") == "Такой задачи нет."  # a stale card
    await rig.tg.wait_for(lambda: card(rig, water).visible_text == "🗑 Удалена")
    say(rig, "/cron kill 2")
    await rig.wait_text("сейчас не выполняется")


async def _tic(rig: Rig) -> None:
    say(rig, "/tic")
    await rig.wait_text("Расписание: каждые 30 мин")
    say(rig, "/tic every 45m")
    await rig.wait_text("Буду проверять каждые 45 мин.")
    say(rig, "/tic every 10s")
    await rig.wait_text("Не могу задать такой интервал")
    say(rig, "/tic on")
    await rig.wait_text("Регулярные проверки включены.")
    say(rig, "/tic now")
    await rig.wait_text("Проверять нечего")
    say(rig, "/tic")
    await rig.wait_text("пропущена (проверять было нечего)")
    say(rig, "/tic off")
    await rig.wait_text("Регулярные проверки выключены.")
    say(rig, "/tic frobnicate")
    await rig.wait_text("/tic — состояние")


async def _approvals(rig: Rig) -> None:
    (rig.workdir / "заметки.txt").write_text("молоко\n", encoding="utf-8")
    unchanged = ToolCalls([("write_file", {"path": "заметки.txt", "content": "молоко\n"})])
    shell = ToolCalls([("execute_cmd", {"command": "echo привет"})])
    rig.llm.script(unchanged, Text("Файл уже такой."), shell, Text("Готово."), shell, Text("Снова готово."))
    say(rig, "запиши молоко в заметки")
    first = await wait_prompt(rig, 1, PROMPT)
    assert "без изменений" in first.visible_text, "a no-op write says so instead of an empty diff"
    say(rig, "/approvals")
    await rig.wait_text("Ждут вашего подтверждения")
    approve = first.button_data("✅ Разрешить")
    assert await press(rig, first.message_id, first.button_data("❌ Отклонить")) == "❌ Отклонено"
    await rig.wait_text("Файл уже такой.")
    assert await press(rig, first.message_id, approve) == "Этот запрос уже неактуален."
    say(rig, "выполни echo")
    second = await wait_prompt(rig, 2, PROMPT)
    trusted = await press(rig, second.message_id, second.button_data("⏱ 15 мин"))
    assert trusted == "⏱ 15 мин не буду спрашивать про команды оболочки."
    await rig.wait_text("Готово.")
    say(rig, "/trust")
    bypass = await rig.wait_text("команды оболочки — без подтверждений до")
    assert bypass.visible_text.endswith("(Europe/Berlin)")
    assert await press(rig, bypass.message_id, "ag1:zz:1") == "Эта кнопка больше не работает."
    tap(rig, bypass, "🗑 Отозвать")
    await rig.tg.wait_for(lambda: rig.tg.message(ALLOWED_USER, bypass.message_id).buttons == [])
    say(rig, "ещё раз")
    third = await wait_prompt(rig, 3, PROMPT)
    tap(rig, third, "✅ Разрешить")
    await rig.wait_text("Снова готово.")


async def _document(rig: Rig) -> None:
    """A document is saved in the workspace and the model told where (issue 15); the user reads
    only Russian about it (the model-facing attachment line is English, as every prompt is)."""
    rig.llm.script(Text("Про отчёт: расскажите подробнее."))
    rig.tg.send_user_document(ALLOWED_USER, "report.pdf", b"%PDF-1.4", caption="что в этом отчёте?")
    await rig.wait_text("Про отчёт: расскажите подробнее.")
    told = [m["content"] for m in rig.llm.requests[-1]["messages"] if m["role"] == "user"][-1]
    told = told if isinstance(told, str) else " ".join(p.get("text", "") for p in told)
    assert told.startswith("что в этом отчёте?") and "report.pdf" in told and "read it with read_file" in told
    [saved] = [p for p in (rig.workdir / "inbox").rglob("report.pdf")]
    assert saved.read_bytes() == b"%PDF-1.4"
