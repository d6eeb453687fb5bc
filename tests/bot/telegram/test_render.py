"""Markdown → Telegram HTML: examples, and properties: any input renders to HTML Telegram accepts,
and what the model wrote (table cells, list numbers, code) keeps its text and meaning."""

from __future__ import annotations

import re
from collections.abc import Callable
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgram.bot.telegram.views import render as render_module
from agentgram.bot.telegram.views.render import escape, html_to_text, markdown_to_html
from tests.fakes.telegram_html import parse_html, parse_html_entities, visible_length

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
    """Render, failing the test if the escaped-text fallback was used or Telegram would reject the HTML."""
    with patch.object(render_module.log, "exception", side_effect=AssertionError("fallback used")):
        html = markdown_to_html(markdown)
    assert parse_html(html) == html_to_text(html)  # parse_html raises TelegramHTMLError on bad HTML
    return html


def pre_texts(html: str) -> list[str]:
    """The visible text of each ``<pre>`` block, as Telegram would show it."""
    text, entities = parse_html_entities(html)
    units = text.encode("utf-16-le", "surrogatepass")
    return [
        units[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le", "surrogatepass")
        for e in entities
        if e.type == "pre"
    ]


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


def test_ordered_list_written_with_ones_counts_up() -> None:
    assert render("1. a\n1. b\n1. c") == "1. a\n2. b\n3. c"
    assert render("3. c\n3. d\n9. e") == "3. c\n4. d\n5. e"
    assert render("- x\n  1. a\n  1. b") == "• x\n  1. a\n  2. b"


def test_code_in_a_list_item_keeps_its_exact_text() -> None:
    markdown = "1. Run:\n\n   ```sh\n   cd /srv\n     make <all> && echo ok\n   ```\n2. Done"
    html = render(markdown)
    assert pre_texts(html) == ["cd /srv\n  make <all> && echo ok"]
    assert html == (
        '1. Run:\n<pre><code class="language-sh">cd /srv\n  make &lt;all&gt; &amp;&amp; echo ok</code></pre>\n2. Done'
    )


def test_code_in_a_nested_list_and_in_quotes_keeps_its_exact_text() -> None:
    assert pre_texts(render("- a\n  - b\n\n    ```\n    l1\n    l2\n    ```")) == ["l1\nl2"]
    assert pre_texts(render("> ```\n> a\n>   b\n> ```")) == ["a\n  b"]
    assert pre_texts(render("> > ```\n> > a\n> > b\n> > ```")) == ["a\nb"]
    assert pre_texts(render("- > ```\n  > a\n  >  b\n  > ```")) == ["a\n b"]


def test_blockquote_and_nested_quote() -> None:
    assert render("> said\n> > earlier") == "<blockquote>said\n\n&gt; earlier</blockquote>"


def test_table_that_fits_is_aligned_in_pre() -> None:
    markdown = "| name | qty |\n|---|--:|\n| apple | `3` |\n| pear | 15 |"
    assert render(markdown) == "<pre>name  | qty\n------+----\napple |   3\npear  |  15</pre>"


def test_table_alignment_and_wide_characters() -> None:
    markdown = "| c | 名前 |\n|:-:|---|\n| long cell | 東京 <&> |"
    assert pre_texts(render(markdown)) == ["    c     | 名前\n----------+---------\nlong cell | 東京 <&>"]


def test_table_too_wide_is_flattened_to_lines() -> None:
    markdown = "| name | quantity in stock |\n|---|---|\n| apple | `3` |\n| a rather long pear name | 5 |"
    assert render(markdown) == (
        "<b>name | quantity in stock</b>\napple | <code>3</code>\na rather long pear name | 5"
    )


def test_table_with_a_link_is_flattened_so_the_link_stays() -> None:
    markdown = "| site | note |\n|---|---|\n| [docs](https://x.org) | ok |"
    assert render(markdown) == '<b>site | note</b>\n<a href="https://x.org">docs</a> | ok'


def test_table_row_with_more_cells_than_the_header_keeps_them() -> None:
    markdown = "| a | b |\n|---|---|\n| 1 | 2 | 3 | 4 |\n| x |"
    assert render(markdown) == "<pre>a | b\n--+---+---+--\n1 | 2 | 3 | 4\nx</pre>"
    wide = "| a | b |\n|---|---|\n| one long cell here | two long cell here | three | four |"
    assert render(wide) == "<b>a | b</b>\none long cell here | two long cell here | three | four"


def test_table_extra_cells_are_kept_inside_quotes_and_lists() -> None:
    assert pre_texts(render("> | a |\n> |---|\n> | 1 | 2 \\| 3 |")) == ["a\n--+------\n1 | 2 | 3"]
    assert pre_texts(render("- | a |\n  |---|\n  | 1 | 2 |")) == ["a\n--+--\n1 | 2"]


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("", ""),
        ("   \n  ", ""),
        ("**", "**"),
        ("*", "•"),
        ("[", "["),
        ("```", ""),
        ("> ", ""),
        ("- ", "•"),
        ("|a|\n|-|", "<pre>a\n-</pre>"),
        ("| |\n|-|\n| |", ""),
    ],
)
def test_degenerate_inputs_render_valid_html(markdown: str, expected: str) -> None:
    html = render(markdown)  # the fake server's strict validator, and no escaped-text fallback
    assert html == expected
    visible, entities = parse_html_entities(html, strict=True)  # what the fake server would accept
    assert visible == parse_html(html, strict=True) == html_to_text(html)
    assert all(e.length > 0 and e.offset + e.length <= visible_length(html) for e in entities)
    assert bool(visible.strip()) == bool(expected)  # empty only when there is nothing to send


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
    render(markdown)  # validates, and fails if the escaped-text fallback was used


# --- properties: text and meaning survive ---------------------------------------------------

Wrap = Callable[[list[str]], list[str]]


def _in_list_item(marker: str) -> Wrap:
    return lambda lines: [
        marker + lines[0],
        *(" " * len(marker) + line if line else "" for line in lines[1:]),
    ]


def _in_quote(lines: list[str]) -> list[str]:
    return ["> " + line for line in lines]


# Where a block may sit: top level, or inside up to three list items / quotes.
CONTAINERS = st.lists(st.sampled_from([_in_list_item("- "), _in_list_item("1. "), _in_quote]), max_size=3)
UNNUMBERED_CONTAINERS = st.lists(st.sampled_from([_in_list_item("- "), _in_quote]), max_size=3)


def _nest(lines: list[str], containers: list[Wrap]) -> str:
    for wrap in containers:
        lines = wrap(lines)
    return "\n".join(lines)


# Cell text that Markdown shows as written: no emphasis, escapes, pipes, entities or autolinks.
CELL = st.lists(
    st.sampled_from([*"abcXYZ019 .,=+-?/<>&'\"", "é", "名", "😀", "👍🏽", "👨‍👩‍👧"]), max_size=14
).map(lambda chars: "".join(chars).strip())
CELLS = st.lists(CELL, min_size=1, max_size=7)


@settings(max_examples=200, deadline=None)
@given(header=CELLS, rows=st.lists(CELLS, max_size=6), aligns=st.data(), containers=CONTAINERS)
def test_every_table_cell_survives_rendering(
    header: list[str], rows: list[list[str]], aligns: st.DataObject, containers: list[Wrap]
) -> None:
    delimiter = [aligns.draw(st.sampled_from(["---", ":--", "--:", ":-:"])) for _ in header]
    source = [header, delimiter, *rows]
    markdown = _nest(["| " + " | ".join(row) + " |" for row in source], containers)
    lines = html_to_text(render(markdown)).split("\n")
    for row in [header, *rows]:
        cells = [cell for cell in row if cell]
        assert not cells or any(_in_order(line, cells) for line in lines), (row, lines)


def _in_order(line: str, cells: list[str]) -> bool:
    position = 0
    for cell in cells:
        position = line.find(cell, position)
        if position < 0:
            return False
        position += len(cell)
    return True


WRITTEN_NUMBER = st.integers(0, 99_999).map(str) | st.integers(0, 999).map(lambda n: f"00{n}")
ITEM = st.text(st.sampled_from("abc xyz"), min_size=1, max_size=8).map(str.strip).filter(bool)


@settings(max_examples=200, deadline=None)
@given(
    numbers=st.lists(WRITTEN_NUMBER, min_size=1, max_size=8),
    items=st.data(),
    delimiter=st.sampled_from(".)"),
    loose=st.booleans(),
    containers=UNNUMBERED_CONTAINERS,  # an outer numbered item would add a number to the first line
)
def test_ordered_list_shows_consecutive_numbers_from_the_first(
    numbers: list[str], items: st.DataObject, delimiter: str, loose: bool, containers: list[Wrap]
) -> None:
    texts = [items.draw(ITEM) for _ in numbers]
    lines = []
    for number, text in zip(numbers, texts, strict=True):
        lines += [""] if loose and lines else []
        lines.append(f"{number}{delimiter} {text}")
    shown = html_to_text(render(_nest(lines, containers)))
    found = re.findall(rf"^[\s•>]*?(\d+){re.escape(delimiter)} (.*)$", shown, flags=re.MULTILINE)
    start = int(numbers[0])
    assert found == [(str(start + i), text) for i, text in enumerate(texts)]


CODE_LINE = st.text(st.sampled_from([*"ab $|*_#-=>;(){}[]\\/<>&\"'1. ", "😀", "é"]), max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    code_lines=st.lists(CODE_LINE, min_size=1, max_size=6).filter(lambda lines: lines[-1].strip()),
    language=st.sampled_from(["", "sh", "python"]),
    intro=st.booleans(),
    containers=CONTAINERS,
)
def test_code_nested_in_lists_and_quotes_keeps_its_exact_text(
    code_lines: list[str], language: str, intro: bool, containers: list[Wrap]
) -> None:
    block = [*(["intro"] if intro else []), f"```{language}", *code_lines, "```"]
    assert pre_texts(render(_nest(block, containers))) == ["\n".join(code_lines)]
