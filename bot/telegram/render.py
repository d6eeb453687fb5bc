"""Telegram HTML: rendering the LLM's Markdown into it, escaping for it, reading it back.

This module owns the Telegram-HTML format for the bot. The LLM writes CommonMark
(plus tables and ``~~strike~~``); Telegram accepts only a small HTML subset
(``b i u s code pre a blockquote tg-spoiler``). ``markdown_to_html`` parses with
markdown-it-py and walks the syntax tree with a renderer that emits only that subset,
turning everything else (headings, lists, tables, rules, images) into plain text
lines. Raw HTML in the Markdown is never passed through: it is shown as text.

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
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.tree import SyntaxTreeNode

__all__ = ["HtmlToken", "escape", "html_to_text", "markdown_to_html", "tokenize_html"]

log = logging.getLogger(__name__)

BULLET = "•"
RULE = "———"
INDENT = "  "
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
    return parser


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
        """Bullet items become "• item", ordered ones keep their number; nested lines indent by two."""
        ordered = node.type == "ordered_list"
        items = []
        for number, item in enumerate(node.children, start=int(node.attrs.get("start", 1))):
            marker = f"{item.info or number}{item.markup or '.'} " if ordered else f"{BULLET} "
            body = self.blocks(item.children, separator="\n")
            items.append(_prefix_lines(body, marker, INDENT) if body else marker.rstrip())
        return "\n".join(items)

    def table(self, node: SyntaxTreeNode) -> str:
        """Tables become lines: the header row in bold, then one line per row, cells joined by " | "."""
        lines = []
        for section in node.children:
            for row in section.children:
                line = " | ".join(self.inline(cell.children) for cell in row.children)
                lines.append(_wrap("b", line) if section.type == "thead" else line)
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
    head, *tail = text.split("\n")
    return "\n".join([first + head, *(rest + line if line else line for line in tail)])


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
