"""Markdown → Telegram HTML: examples, and the property that any input renders to HTML Telegram accepts."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.telegram import render as render_module
from bot.telegram.render import escape, html_to_text, markdown_to_html
from tests.fakes.telegram_html import parse_html

# Text an LLM might write: Markdown punctuation, HTML specials, newlines, emoji and astral characters.
MARKDOWNISH = st.lists(
    st.one_of(
        st.sampled_from(list("*_`~#>-+=|[]()!<>&;\"'\\:/. \n\t1aZ")),
        st.sampled_from(["```", "```py\n", "http://x.y", "[a](https://b.c)", "||", "    ", "\n\n", "1. "]),
        st.characters(codec="utf-8"),
        st.sampled_from(["😀", "👍🏽", "é", "\u200d", "𝔸", "&amp;", "&lt;"]),
    ),
    max_size=80,
).map("".join)


def render(markdown: str) -> str:
    html = markdown_to_html(markdown)
    parse_html(html)  # raises TelegramHTMLError if Telegram would reject it
    return html


def test_escape_covers_the_three_specials_and_quotes_only_in_attributes() -> None:
    assert escape('a < b > c & "d"') == 'a &lt; b &gt; c &amp; "d"'
    assert escape('"x"', quote=True) == "&quot;x&quot;"


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("1 < 2 & 3 > 2", "1 &lt; 2 &amp; 3 &gt; 2"),
        ("**bold**", "<b>bold</b>"),
        ("_it_", "<i>it</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("`code`", "<code>code</code>"),
        ("`<tag> &amp;`", "<code>&lt;tag&gt; &amp;amp;</code>"),
        ("# Title", "<b>Title</b>"),
        ("a\\\nb", "a\nb"),
        ("a\nb", "a\nb"),
        ("one\n\ntwo", "one\n\ntwo"),
        ("---", "———"),
        ("<div>hi</div>", "&lt;div&gt;hi&lt;/div&gt;"),
        ("x <b>y</b>", "x &lt;b&gt;y&lt;/b&gt;"),
    ],
)
def test_renders_examples(markdown: str, expected: str) -> None:
    assert render(markdown) == expected


def test_fenced_code_with_language_shows_code_literally() -> None:
    markdown = "```python\nif a < b and c & d:\n    print('<tag> &amp;')\n```"
    html = render(markdown)
    assert html == (
        '<pre><code class="language-python">if a &lt; b and c &amp; d:\n'
        "    print('&lt;tag&gt; &amp;amp;')</code></pre>"
    )
    assert html_to_text(html) == "if a < b and c & d:\n    print('<tag> &amp;')"


def test_fence_without_language_is_plain_pre() -> None:
    assert render("```\nx\n```") == "<pre>x</pre>"


def test_unterminated_fence_runs_to_the_end() -> None:
    assert render("intro\n\n```js\nlet a = 1 < 2;\n") == (
        'intro\n\n<pre><code class="language-js">let a = 1 &lt; 2;</code></pre>'
    )


def test_links_keep_only_safe_schemes() -> None:
    assert render("[site](https://example.com/?a=1&b=2)") == (
        '<a href="https://example.com/?a=1&amp;b=2">site</a>'
    )
    assert render("[me](mailto:me@example.com)") == '<a href="mailto:me@example.com">me</a>'
    assert render("[chan](tg://resolve?domain=x)") == '<a href="tg://resolve?domain=x">chan</a>'
    assert render("[file](ftp://host/f)") == "file (ftp://host/f)"
    assert render("[x](javascript:alert(1))") == "[x](javascript:alert(1))"  # not even a link to markdown-it


def test_code_inside_a_link_is_plain_text() -> None:
    assert render("[`f()`](https://x.org)") == '<a href="https://x.org">f()</a>'


def test_image_becomes_alt_text_and_address() -> None:
    assert render("![a *cat*](https://x.org/cat.png)") == "a cat (https://x.org/cat.png)"


def test_nested_lists_are_indented_two_spaces_per_level() -> None:
    markdown = "- one\n- two\n  - inner **b**\n    - deepest\n3. three\n4. four"
    assert render(markdown) == ("• one\n• two\n  • inner <b>b</b>\n    • deepest\n\n3. three\n4. four")


def test_ordered_list_keeps_its_numbers_and_delimiter() -> None:
    assert render("0. zero\n1. one") == "0. zero\n1. one"
    assert render("7) seven\n8) eight") == "7) seven\n8) eight"


def test_blockquote_and_nested_quote() -> None:
    assert render("> said\n> > earlier") == "<blockquote>said\n\n&gt; earlier</blockquote>"


def test_table_is_flattened_to_lines() -> None:
    markdown = "| name | qty |\n|---|---|\n| apple | `3` |\n| pear | 5 |"
    assert render(markdown) == "<b>name | qty</b>\napple | <code>3</code>\npear | 5"


@pytest.mark.parametrize("markdown", ["", "   \n  ", "**", "*", "[", "```", "> ", "- ", "|a|\n|-|"])
def test_degenerate_inputs_render_valid_html(markdown: str) -> None:
    render(markdown)


def test_too_deep_nesting_falls_back_to_escaped_text_instead_of_dropping_it() -> None:
    markdown = ">" * 30 + " deep <x>\n\nafter"
    assert render(markdown) == "&gt;" * 30 + " deep &lt;x&gt;\n\nafter"


def test_double_bars_are_not_spoilers() -> None:
    assert render("if a || b || c") == "if a || b || c"


def test_html_to_text_decodes_entities_and_drops_tags() -> None:
    assert html_to_text('<b>a &lt; b</b> <a href="https://x">&amp;</a> &#128512;') == "a < b & 😀"


@settings(max_examples=300, deadline=None)
@given(MARKDOWNISH)
def test_any_markdown_renders_to_valid_telegram_html(markdown: str) -> None:
    with patch.object(render_module.log, "exception", side_effect=AssertionError("fallback used")):
        html = render(markdown)
    assert html_to_text(html) == parse_html(html)
