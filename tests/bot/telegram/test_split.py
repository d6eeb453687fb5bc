"""Splitting Telegram HTML: pieces fit the limit, stay valid, and lose nothing visible."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgram.bot.telegram.views.render import markdown_to_html, tokenize_html
from agentgram.bot.telegram.views.split import TELEGRAM_LIMIT, _split, split_html, split_plain, utf16_length
from tests.bot.telegram.test_render import MARKDOWNISH
from tests.fakes.telegram_html import parse_html, visible_length


def assert_split_is_faithful(whole: str, pieces: list[str], limit: int) -> None:
    """Each piece is valid HTML and fits; the whole's visible text is the pieces' visible texts in
    order, with only whitespace between them (whitespace-only pieces are dropped, nothing is trimmed)."""
    for piece in pieces:
        assert parse_html(piece).strip(), f"blank piece {piece!r}"
        assert visible_length(piece) <= limit
    assert_joined_with_whitespace(parse_html(whole), [parse_html(piece) for piece in pieces])


def assert_joined_with_whitespace(whole: str, parts: list[str]) -> None:
    pattern = r"\s*" + r"\s*".join(re.escape(part) for part in parts) + r"\s*"
    assert re.fullmatch(pattern, whole), "visible text lost or reordered"


def test_long_reply_splits_at_paragraphs_into_three_pieces() -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 196 for n in range(10)]
    text = "\n\n".join(paragraph.strip() for paragraph in paragraphs)
    assert 9_900 <= len(text) <= 10_100

    pieces = split_html(text)

    assert len(pieces) == 3
    assert all(len(piece) <= TELEGRAM_LIMIT for piece in pieces)
    assert "".join(pieces) == text
    assert all(piece.endswith("\n\n") for piece in pieces[:-1])


def test_short_text_is_one_piece() -> None:
    assert split_html("<b>hi</b>") == ["<b>hi</b>"]
    assert split_html("") == []


def test_long_pre_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"x{n} = {n} &lt; {n + 1}" for n in range(400))
    html = f'Here:\n<pre><code class="language-py">{code}</code></pre>\nDone.'

    pieces = split_html(html, 1000)

    assert len(pieces) > 2
    for piece in pieces[1:-1]:
        assert piece.startswith('<pre><code class="language-py">')
        assert piece.endswith("</code></pre>")
    assert pieces[0].endswith("</code></pre>")
    assert pieces[-1].startswith('<pre><code class="language-py">')
    assert_split_is_faithful(html, pieces, 1000)


def test_cut_inside_formatting_keeps_link_attributes() -> None:
    html = '<b>bold <a href="https://x.org/?a=1&amp;b=2">' + "link text " * 10 + "</a></b> tail"
    pieces = split_html(html, 30)
    assert all(piece.count('<a href="https://x.org/?a=1&amp;b=2">') == ("link" in piece) for piece in pieces)
    assert_split_is_faithful(html, pieces, 30)


def test_single_long_word_is_hard_cut() -> None:
    word = "x" * 5000
    pieces = split_html(word)
    assert [len(piece) for piece in pieces] == [4096, 904]
    assert "".join(pieces) == word


def test_entities_count_as_one_character_and_are_never_cut() -> None:
    html = "&lt;" * 10
    assert split_html(html, 4) == ["&lt;" * 4, "&lt;" * 4, "&lt;" * 2]


def test_astral_characters_count_as_two_units_and_are_never_cut() -> None:
    text = "😀" * 5
    assert utf16_length(text) == 10
    assert split_plain(text, 4) == ["😀😀", "😀😀", "😀"]
    assert split_html("a" + "😀" * 3, 4) == ["a😀", "😀😀"]


def test_joined_emoji_is_not_cut_before_its_modifier() -> None:
    text = "ab 👍🏽"  # the thumbs-up and its skin tone are 4 units together
    assert split_plain("x" * 3 + "👍🏽", 5) == ["xxx", "👍🏽"]
    assert split_plain(text, 6) == ["ab ", "👍🏽"]


def test_prefers_lines_then_spaces() -> None:
    assert split_plain("aaaa bbbb\ncccc dddd", 12) == ["aaaa bbbb\n", "cccc dddd"]
    assert split_plain("aaaa bbbb cccc", 12) == ["aaaa bbbb ", "cccc"]


def test_whitespace_only_pieces_are_dropped() -> None:
    assert split_plain("a" * 5 + " " * 12 + "b", 5) == ["aaaaa", "  b"]
    assert split_html("<pre>" + " " * 10 + "</pre>", 4) == []


@settings(max_examples=200, deadline=None)
@given(MARKDOWNISH, st.integers(min_value=20, max_value=200))
def test_rendered_markdown_splits_faithfully(markdown: str, limit: int) -> None:
    html = markdown_to_html(markdown * 4)
    assert_split_is_faithful(html, split_html(html, limit), limit)


@settings(max_examples=200, deadline=None)
@given(MARKDOWNISH)
def test_a_short_rendered_reply_is_one_piece_exactly_as_the_full_split_makes_it(markdown: str) -> None:
    """The short path (no tokenizing) gives what the full split gives, blank texts included."""
    html = markdown_to_html(markdown)
    assert split_html(html) == _split(list(tokenize_html(html)), TELEGRAM_LIMIT)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=2, max_value=50))
def test_plain_text_splits_faithfully(text: str, limit: int) -> None:
    pieces = split_plain(text, limit)
    assert all(utf16_length(piece) <= limit and piece.strip() for piece in pieces)
    assert_joined_with_whitespace(text, pieces)
