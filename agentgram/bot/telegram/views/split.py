"""Splitting long replies into Telegram-sized messages.

Telegram limits a message to 4096 characters *after entity parsing*, counted in UTF-16
code units; tags do not count, ``&amp;`` counts as one. ``split_html`` measures exactly
that and cuts where a reader would: after a blank line, else after a line, else after a
space, else (one very long word) anywhere, but never inside a tag, an entity or a
surrogate pair, and not before a combining mark or joiner when that can be avoided.
Tags open at a cut are closed at the end of the piece and reopened, with the same
attributes, at the start of the next one, so every piece is valid HTML on its own.

Nothing is trimmed: the pieces' visible texts, concatenated, equal the visible text of
the input, except that pieces whose visible text is only whitespace are dropped
(Telegram refuses empty messages). So the precise property is: the input's visible text
is the concatenation of the pieces' visible texts with whitespace-only runs between them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentgram.bot.telegram.views.render import HtmlToken, tokenize_html

__all__ = ["TELEGRAM_LIMIT", "split_html", "split_plain", "utf16_length"]

TELEGRAM_LIMIT = 4096
_TAGS = re.compile(r"<[^>]*>")
_SEPARATORS = ("\n\n", "\n", " ")  # preferred cut points, best first; the cut goes after them


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's limits."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_html(html: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split Telegram HTML into valid pieces of visible length ≤ ``limit`` (see module docstring).

    ``limit`` must be at least 2, so that an astral character (2 UTF-16 units) fits in a piece.
    """
    if 2 * len(html) <= limit and _plainly_visible(html):  # the usual short answer: one piece
        return [html]
    return _split(list(tokenize_html(html)), limit)


def _plainly_visible(html: str) -> bool:
    """Whether ``html`` shows some text, told without tokenizing it: what is left once the tags
    are taken out is not blank and holds no entity (one could be a space). ``False`` only means
    "not told": the full split decides."""
    text = _TAGS.sub("", html)
    return "&" not in text and not text.isspace() and bool(text)


def split_plain(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split plain text (no markup) into pieces of length ≤ ``limit``, by the same rules."""
    return _split([HtmlToken(char, text=char) for char in text], limit)


@dataclass(slots=True)
class _OpenTags:
    """The tags open at a position, outermost first, as their raw source (to reopen them)."""

    tokens: list[HtmlToken] = field(default_factory=list)

    def update(self, tokens: Iterable[HtmlToken]) -> None:
        for token in tokens:
            if token.tag and not token.closing:
                self.tokens.append(token)
            elif token.tag:
                self.close(token.tag)

    def close(self, tag: str) -> None:
        for index in range(len(self.tokens) - 1, -1, -1):
            if self.tokens[index].tag == tag:
                del self.tokens[index:]
                return

    def reopen(self) -> str:
        return "".join(token.raw for token in self.tokens)

    def closers(self) -> str:
        return "".join(f"</{token.tag}>" for token in reversed(self.tokens))


def _split(tokens: list[HtmlToken], limit: int) -> list[str]:
    pieces: list[str] = []
    open_tags = _OpenTags()
    start = 0
    while start < len(tokens):
        end = _cut_index(tokens, start, limit)
        prefix = open_tags.reopen()
        open_tags.update(tokens[start:end])
        body = "".join(token.raw for token in tokens[start:end])
        if not _is_blank(tokens[start:end]):
            pieces.append(prefix + body + open_tags.closers())
        start = end
    return pieces


def _cut_index(tokens: list[HtmlToken], start: int, limit: int) -> int:
    """Index where the piece starting at ``start`` ends (exclusive)."""
    fit = _fit_end(tokens, start, limit)
    if fit == len(tokens):
        return fit
    chars = [index for index in range(start, fit) if tokens[index].text]
    visible = "".join(tokens[index].text for index in chars)
    cut = chars[_cut_position(visible, following=tokens[fit].text) - 1] + 1
    return _absorb_closing_tags(tokens, cut)


def _fit_end(tokens: list[HtmlToken], start: int, limit: int) -> int:
    """End of the longest run from ``start`` whose visible length fits (at least one character)."""
    used = 0
    seen_char = False
    for index in range(start, len(tokens)):
        units = utf16_length(tokens[index].text)
        if units and seen_char and used + units > limit:
            return index
        used += units
        seen_char = seen_char or bool(units)
    return len(tokens)


def _cut_position(visible: str, following: str) -> int:
    """How many characters of the window ``visible`` go into this piece (≥ 1).

    A separator in the second half of the window wins, best kind first; else the last
    separator anywhere; else a hard cut. ``following`` is the first character that did not fit.
    """
    for minimum in (len(visible) // 2, 1):
        for separator in _SEPARATORS:
            end = visible.rfind(separator) + len(separator)
            if end >= len(separator) and end >= minimum:
                return end
    return _hard_cut(visible + following, len(visible))


def _hard_cut(text: str, cut: int) -> int:
    """Cut ``text`` at ``cut``, stepping back so a combining mark or joiner stays with its base."""
    for position in range(cut, 0, -1):
        if not _is_attached(text[position - 1], text[position]):
            return position
    return cut


def _is_attached(before: str, after: str) -> bool:
    """Whether the characters on both sides of a cut belong to one visible symbol."""
    return (
        "\u200d" in (before, after)
        or unicodedata.category(after) in ("Mn", "Me", "Mc")
        or "\U0001f3fb" <= after <= "\U0001f3ff"  # skin-tone modifiers
    )


def _absorb_closing_tags(tokens: list[HtmlToken], cut: int) -> int:
    """Closing tags right after a cut stay in this piece, so the next one starts with content."""
    while cut < len(tokens) and tokens[cut].closing:
        cut += 1
    return cut


def _is_blank(tokens: list[HtmlToken]) -> bool:
    return not "".join(token.text for token in tokens).strip()
