"""Telegram HTML: rendering the LLM's Markdown into it, escaping for it, reading it back.

This module owns the Telegram-HTML format for the bot. The LLM writes CommonMark
(plus tables and ``~~strike~~``); Telegram accepts only a small HTML subset
(``b i u s code pre a blockquote tg-spoiler``). ``markdown_to_html`` parses with
markdown-it-py and walks the syntax tree with a renderer that emits only that subset,
turning everything else (headings, lists, tables, rules, images) into plain text
lines. Raw HTML in the Markdown is never passed through: it is shown as text.

What the model wrote is never lost or altered in meaning:

- every table cell survives, including cells beyond the header's width (GFM drops
  them; ``_table_keeping_every_cell`` puts them back). A table that fits
  ``TABLE_WIDTH`` monospace columns is laid out in a ``<pre>`` with padded columns;
  a wider one, or one with links or images in its cells (a ``<pre>`` can't carry
  them), is flattened to one line per row;
- ordered lists show the numbers CommonMark gives them (the first item's number,
  then consecutive), not the numbers written: models often write ``1. 1. 1.``;
- code keeps its exact text: the indentation that marks lines as belonging to a list
  item or an inner quote is never added inside a ``<pre>``.

``||spoiler||`` is deliberately not supported: LLMs write ``a || b`` in prose far more
often than they write spoilers, and turning that into a hidden span would garble it.

Entity nesting follows the Bot API rules, so Telegram never has to drop an entity:
nothing nests inside ``code``/``pre``, ``code`` is not placed inside a link, links do
not nest, and only the outermost blockquote becomes a ``<blockquote>`` (inner ones
are marked with a ``> `` prefix instead).

``tokenize_html`` is the one reader of Telegram HTML (used by ``html_to_text`` here and
by the splitter in ``bot.telegram.split``).
"""

from __future__ import annotations

import html
import logging
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block.table import escapedSplit, getLine
from markdown_it.rules_block.table import table as gfm_table
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode

__all__ = ["HtmlToken", "escape", "html_to_text", "markdown_to_html", "tokenize_html"]

log = logging.getLogger(__name__)

BULLET = "•"
RULE = "———"
INDENT = "  "
# A table is laid out in columns only if every line fits this many monospace cells:
# about what a phone shows in a message bubble before Telegram wraps a <pre> line.
TABLE_WIDTH = 40
TABLE_GAP = " | "
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_LANGUAGE_UNSAFE = re.compile(r"[^\w+#.-]")


class _TooDeeplyNested(Exception):
    """markdown-it silently drops blocks nested deeper than ``maxNesting``; we refuse instead."""


def _make_parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    tokenize = parser.block.tokenize

    def tokenize_or_refuse(state: StateBlock, start_line: int, end_line: int) -> None:
        too_deep = state.level >= parser.options.maxNesting
        if too_deep and state.skipEmptyLines(start_line) < end_line:
            raise _TooDeeplyNested
        tokenize(state, start_line, end_line)

    parser.block.tokenize = tokenize_or_refuse  # type: ignore[method-assign,assignment]
    parser.block.ruler.at("table", _table_keeping_every_cell, {"alt": ["paragraph", "reference"]})
    return parser


def _table_keeping_every_cell(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """GFM's table rule, except that cells beyond the header's width are kept, not dropped.

    The extra cells are re-read from the row's line as the block state sees it (so
    quote markers and list indentation are already removed), and the header is
    extended with empty cells to the widest row.
    """
    first = len(state.tokens)
    if not gfm_table(state, start_line, end_line, silent):
        return False
    if not silent:
        state.tokens[first:] = _with_extra_cells(state, state.tokens[first:])
    return True


def _with_extra_cells(state: StateBlock, tokens: list[Token]) -> list[Token]:
    header_width = sum(token.type == "th_open" for token in tokens)
    rows = {id(t): _row_cells(state, t.map[0]) for t in tokens if t.type == "tr_open" and t.map}
    widest = max(len(cells) for cells in rows.values())
    result: list[Token] = []
    row: list[str] = []
    for token in tokens:
        if token.type == "tr_open":
            row = rows.get(id(token), [])
        elif token.type == "tr_close":
            in_header = result[-1].type == "th_close"
            extra = [""] * (widest - header_width) if in_header else row[header_width:]
            result += _cell_tokens("th" if in_header else "td", extra, token)
        result.append(token)
    return result


def _row_cells(state: StateBlock, line: int) -> list[str]:
    """A table row's cells, split exactly as GFM's table rule splits them."""
    cells = escapedSplit(mdTrim(getLine(state, line)))
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return [mdTrim(cell) for cell in cells]


def _cell_tokens(tag: str, texts: list[str], row_close: Token) -> list[Token]:
    tokens = []
    for text in texts:
        inline = Token("inline", "", 0, content=text, children=[], level=row_close.level + 2, block=True)
        opening = Token(f"{tag}_open", tag, 1, level=row_close.level + 1, block=True)
        closing = Token(f"{tag}_close", tag, -1, level=row_close.level + 1, block=True)
        tokens += [opening, inline, closing]
    return tokens


_parser = _make_parser()


# --- escaping -------------------------------------------------------------------------


def escape(text: str, *, quote: bool = False) -> str:
    """Escape text for Telegram HTML: ``&``, ``<``, ``>``; also ``"`` when ``quote`` (attributes)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


# --- Markdown -> Telegram HTML ---------------------------------------------------------


def markdown_to_html(markdown: str) -> str:
    """Render the LLM's Markdown as Telegram HTML. Never raises: falls back to escaped text."""
    try:
        tree = SyntaxTreeNode(_parser.parse(markdown))
        return _Renderer().blocks(tree.children, separator="\n\n").strip("\n")
    except _TooDeeplyNested:
        log.warning("markdown nested too deeply to render; sending escaped text")
        return escape(markdown)
    except Exception:  # arbitrary LLM output must never break delivery
        log.exception("markdown rendering failed; sending escaped text")
        return escape(markdown)


@dataclass(slots=True)
class _Renderer:
    """Walks a markdown-it syntax tree; the flags track where Telegram forbids nesting."""

    in_quote: bool = False
    in_link: bool = False

    # blocks

    def blocks(self, nodes: list[SyntaxTreeNode], separator: str) -> str:
        rendered = (self.block(node) for node in nodes)
        return separator.join(text for text in rendered if text)

    def block(self, node: SyntaxTreeNode) -> str:
        match node.type:
            case "paragraph":
                return self.inline(node.children)
            case "heading":
                return _wrap("b", self.inline(node.children))
            case "blockquote":
                return self.blockquote(node)
            case "bullet_list" | "ordered_list":
                return self.list_lines(node)
            case "fence" | "code_block":
                return _code_block(node.content, node.info if node.type == "fence" else "")
            case "hr":
                return RULE
            case "table":
                return self.table(node)
            case _:  # html_block etc. (not produced with html=False) and future node types
                return escape(node.content.strip("\n"))

    def blockquote(self, node: SyntaxTreeNode) -> str:
        if self.in_quote:  # Telegram blockquotes can't nest
            return _prefix_lines(self.blocks(node.children, "\n\n"), "&gt; ", "&gt; ")
        self.in_quote = True
        try:
            return _wrap("blockquote", self.blocks(node.children, "\n\n"))
        finally:
            self.in_quote = False

    def list_lines(self, node: SyntaxTreeNode) -> str:
        """Bullet items become "• item", ordered ones "3. item"; nested lines indent by two.

        Ordered items are numbered as CommonMark numbers them: from the first item's
        number on, whatever numbers the later items were written with.
        """
        ordered = node.type == "ordered_list"
        items = []
        for number, item in enumerate(node.children, start=int(node.attrs.get("start", 1))):
            marker = f"{number}{item.markup or '.'} " if ordered else f"{BULLET} "
            body = self.blocks(item.children, separator="\n")
            items.append(_prefix_lines(body, marker, INDENT) if body else marker.rstrip())
        return "\n".join(items)

    def table(self, node: SyntaxTreeNode) -> str:
        rows = [row for section in node.children for row in section.children]
        return _table_as_pre(rows) or self.table_lines(rows)

    def table_lines(self, rows: list[SyntaxTreeNode]) -> str:
        """The fallback: the header row in bold, then one line per row, cells joined by " | "."""
        lines = []
        for row in rows:
            cells = [self.inline(cell.children) for cell in row.children]
            while cells and not cells[-1]:  # the padding of short rows, not the model's text
                cells.pop()
            line = TABLE_GAP.join(cells)
            if line:
                lines.append(_wrap("b", line) if row.parent and row.parent.type == "thead" else line)
        return "\n".join(lines)

    # inline

    def inline(self, nodes: list[SyntaxTreeNode]) -> str:
        if len(nodes) == 1 and nodes[0].type == "inline":
            nodes = nodes[0].children
        return "".join(self.inline_node(node) for node in nodes)

    def inline_node(self, node: SyntaxTreeNode) -> str:
        match node.type:
            case "text":
                return escape(node.content)
            case "softbreak" | "hardbreak":
                return "\n"
            case "code_inline":
                return escape(node.content) if self.in_link else _wrap("code", escape(node.content))
            case "strong":
                return _wrap("b", self.inline(node.children))
            case "em":
                return _wrap("i", self.inline(node.children))
            case "s":
                return _wrap("s", self.inline(node.children))
            case "link":
                return self.link(node)
            case "image":
                return self.image(node)
            case _:
                return escape(node.content)

    def link(self, node: SyntaxTreeNode) -> str:
        href = str(node.attrs.get("href", ""))
        if self.in_link:
            return self.inline(node.children)
        if not _is_allowed_link(href):  # shown, not linked: Telegram would reject the href
            label = self.inline(node.children)
            return f"{label} ({escape(href)})" if label and href else label or escape(href)
        self.in_link = True
        try:
            label = self.inline(node.children)
        finally:
            self.in_link = False
        return f'<a href="{escape(href, quote=True)}">{label or escape(href)}</a>'

    def image(self, node: SyntaxTreeNode) -> str:
        """An image becomes its alt text plus the address, which Telegram shows as a link."""
        alt = escape(_plain_text(node))
        src = escape(str(node.attrs.get("src", "")))
        return f"{alt} ({src})" if alt and src else alt or src


def _table_as_pre(rows: list[SyntaxTreeNode]) -> str:
    """The table as aligned monospace columns, or "" when it doesn't fit or can't be plain text."""
    grid = _plain_grid(rows)
    if grid is None or not any(text for row in grid for text, _ in row):
        return ""
    columns = max(len(row) for row in grid)
    widths = [max((row[i][1] for row in grid if i < len(row)), default=0) for i in range(columns)]
    if sum(widths) + len(TABLE_GAP) * (columns - 1) > TABLE_WIDTH:
        return ""
    aligns = [_cell_align(cell) for cell in rows[0].children] + [""] * columns
    header, *body = (_table_line(row, widths, aligns) for row in grid)
    body = [line for line in body if line]  # a row of empty cells says nothing
    if header:  # GFM's first row is the header; a rule sets it apart
        body = [header, "-+-".join("-" * width for width in widths), *body]
    return _wrap("pre", escape("\n".join(body)))


def _plain_grid(rows: list[SyntaxTreeNode]) -> list[list[tuple[str, int]]] | None:
    """Each cell's plain text and display width; None if some cell can't be plain monospace
    text (a link or image would lose its address, a tab has no known width)."""
    grid = []
    for row in rows:
        cells = []
        for cell in row.children:
            text = _cell_text(cell)
            width = None if text is None else _display_width(text)
            if text is None or width is None:
                return None
            cells.append((text, width))
        grid.append(cells)
    return grid


def _table_line(cells: list[tuple[str, int]], widths: list[int], aligns: list[str]) -> str:
    """One row, each cell padded to its column's width; the row ends after its last text."""
    while cells and not cells[-1][0]:
        cells = cells[:-1]
    padded = []
    for (text, width), column_width, align in zip(cells, widths, aligns, strict=False):
        room = column_width - width
        left = room if align == "right" else room // 2 if align == "center" else 0
        padded.append(" " * left + text + " " * (room - left))
    return TABLE_GAP.join(padded).rstrip(" ")


def _cell_text(node: SyntaxTreeNode) -> str | None:
    """A cell's text with formatting dropped; None if it holds a link or image."""
    if node.type in ("link", "image"):
        return None
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    parts = [_cell_text(child) for child in node.children]
    return None if None in parts else "".join(part for part in parts if part is not None)


def _cell_align(cell: SyntaxTreeNode) -> str:
    return str(cell.attrs.get("style", "")).removeprefix("text-align:")


def _display_width(text: str) -> int | None:
    """Monospace cells ``text`` takes, or None when it can't be known (tabs, controls).

    East Asian wide and fullwidth characters (CJK, most emoji) take two cells;
    combining marks and variation selectors (Mn, Me), format characters such as ZWJ
    (Cf) and skin-tone modifiers take none, and so does whatever a ZWJ glues onto an
    emoji. Good enough for alignment; exact only where fonts agree, which for emoji
    they often don't (a text-style symbol made emoji by U+FE0F counts as one cell).
    """
    width = 0
    joined = False
    for char in text:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Zl", "Zp"):
            return None
        if joined or category in ("Mn", "Me", "Cf") or "\U0001f3fb" <= char <= "\U0001f3ff":
            joined = char == "\u200d"
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _code_block(content: str, info: str) -> str:
    code = escape(content.rstrip("\n"))
    if not code:
        return ""
    language = _LANGUAGE_UNSAFE.sub("", info.split(maxsplit=1)[0]) if info.strip() else ""
    if language:
        return f'<pre><code class="language-{escape(language, quote=True)}">{code}</code></pre>'
    return _wrap("pre", code)


def _wrap(tag: str, inner: str) -> str:
    return f"<{tag}>{inner}</{tag}>" if inner else ""


def _prefix_lines(text: str, first: str, rest: str) -> str:
    """Prefix the first line with ``first`` and the others with ``rest``, except in code.

    Lines of a ``<pre>`` (and the line opening one) get no prefix: indentation added
    there would become part of the code, and copied commands would break.
    """
    head, *tail = text.split("\n")
    lines = [first + head]
    in_pre = _ends_in_pre(head, in_pre=False)
    for line in tail:
        lines.append(line if in_pre or not line or line.startswith("<pre") else rest + line)
        in_pre = _ends_in_pre(line, in_pre)
    return "\n".join(lines)


def _ends_in_pre(line: str, in_pre: bool) -> bool:
    """Whether a ``<pre>`` is open after this line of our own output (text is escaped, so
    every ``<pre`` is a tag; ``<pre>`` never nests)."""
    opened, closed = line.rfind("<pre"), line.rfind("</pre>")
    return in_pre if opened == closed == -1 else opened > closed


def _is_allowed_link(href: str) -> bool:
    return href.lower().startswith(_LINK_SCHEMES)


def _plain_text(node: SyntaxTreeNode) -> str:
    """The text of a node with its formatting dropped (for image alt text)."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain_text(child) for child in node.children)


# --- reading Telegram HTML -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HtmlToken:
    """One piece of Telegram HTML: a tag (``tag`` set) or one visible character (``text``).

    ``raw`` is the exact source slice, so joining every token's ``raw`` gives the input back.
    """

    raw: str
    text: str = ""
    tag: str = ""
    closing: bool = False


_HTML_PART = re.compile(
    r"""(?P<tag><(?P<closing>/?)(?P<name>[a-zA-Z][\w-]*)(?:\s(?:[^>"']|"[^"]*"|'[^']*')*)?\s*/?>)"""
    r"|(?P<entity>&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|lt|gt|amp|quot);)"
    r"|(?P<char>[\s\S])"
)


def tokenize_html(text: str) -> Iterator[HtmlToken]:
    """Split Telegram HTML into tags and visible characters (entities decoded).

    Telegram knows numeric entities and only four named ones (``lt gt amp quot``); each
    decodes to one character. Lenient on purpose: a ``<`` or ``&`` that starts no tag or
    known entity is read as itself.
    """
    for match in _HTML_PART.finditer(text):
        raw = match.group()
        if match.group("tag"):
            yield HtmlToken(raw, tag=match.group("name").lower(), closing=bool(match.group("closing")))
        elif match.group("entity"):
            yield HtmlToken(raw, text=html.unescape(raw))
        else:
            yield HtmlToken(raw, text=raw)


def html_to_text(html_text: str) -> str:
    """The visible text of Telegram HTML: tags dropped, entities decoded (for plain-text fallback)."""
    return "".join(token.text for token in tokenize_html(html_text))
