"""Validation of Telegram's HTML ``parse_mode``, as strict as the real Bot API (or stricter).

Owns the one rule "is this text acceptable to Telegram with parse_mode=HTML, and what does the user
see?". It follows tdlib's ``parse_html`` (td/telegram/MessageEntity.cpp): same tag set, same
nesting rules, same error phrases and UTF-8 byte offsets, so a test failure reads like the
production error it predicts.

``strict=True`` (the default) is deliberately stricter than tdlib where the Bot API documentation
says "must": a bare ``&``, an unknown ``&name;``, a numeric entity without ``;`` and a bare ``>``
are errors, although tdlib lets them through as literal text. Renderers that pass the strict check
are correct by the documentation, not by tdlib's leniency. ``strict=False`` mimics tdlib exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ALLOWED_TAGS", "TelegramHTMLError", "parse_html", "parse_html_entities", "visible_length"]

ALLOWED_TAGS = frozenset(
    {
        "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins",
        "tg-spoiler", "tg-emoji", "span", "pre", "code", "blockquote",
    }
)  # fmt: skip

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACES = " \t\n\r\f\v"
_NAME_TOKEN = re.compile(r"[A-Za-z0-9.\-]*")


class TelegramHTMLError(ValueError):
    """Raised for text Telegram would reject; ``str(err)`` is the full Bot API description."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"Bad Request: can't parse entities: {reason}")


@dataclass(frozen=True, slots=True)
class HTMLEntity:
    """One formatting entity of the parsed text; offsets/lengths are UTF-16 code units like Telegram's."""

    type: str  # bold, italic, underline, strikethrough, spoiler, text_link, custom_emoji, code, pre, blockquote, expandable_blockquote
    offset: int
    length: int
    argument: str = ""  # url, custom_emoji_id or pre language


_ENTITY_TYPE = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
    "span": "spoiler", "a": "text_link", "tg-emoji": "custom_emoji", "code": "code", "pre": "pre",
    "blockquote": "blockquote",
}  # fmt: skip


@dataclass(slots=True)
class _Open:
    tag: str
    argument: str
    utf16_start: int
    byte_offset: int
    expandable: bool = False


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


class _Parser:
    """Single pass over the text, tdlib style; ``pos`` indexes characters, errors report UTF-8 bytes."""

    def __init__(self, text: str, strict: bool) -> None:
        self.text = text
        self.strict = strict
        self.pos = 0
        self.out: list[str] = []
        self.utf16 = 0
        self.stack: list[_Open] = []
        self.entities: list[HTMLEntity] = []

    # -- helpers -----------------------------------------------------------------------------------
    def byte_offset(self, index: int) -> int:
        return len(self.text[:index].encode("utf-8", "surrogatepass"))

    def fail(self, reason: str) -> TelegramHTMLError:
        return TelegramHTMLError(reason)

    def at(self, index: int) -> str:
        return self.text[index] if index < len(self.text) else ""

    def emit(self, s: str) -> None:
        self.out.append(s)
        self.utf16 += _utf16_len(s)

    def skip_spaces(self) -> None:
        while self.at(self.pos) and self.at(self.pos) in _SPACES:
            self.pos += 1

    # -- grammar -----------------------------------------------------------------------------------
    def run(self) -> tuple[str, list[HTMLEntity]]:
        n = len(self.text)
        while self.pos < n:
            c = self.text[self.pos]
            if c == "&":
                self.entity()
            elif c == "<":
                if self.at(self.pos + 1) == "/":
                    self.end_tag()
                else:
                    self.start_tag()
            elif c == ">" and self.strict:
                raise self.fail(
                    f'Character ">" must be escaped as "&gt;" at byte offset {self.byte_offset(self.pos)}'
                )
            else:
                self.emit(c)
                self.pos += 1
        if self.stack:
            raise self.fail(f'Can\'t find end tag corresponding to start tag "{self.stack[-1].tag}"')
        self.entities.sort(key=lambda e: (e.offset, -e.length))
        return "".join(self.out), self.entities

    def decode_entity(self, start: int) -> tuple[str, int] | None:
        """tdlib's decode_html_entity: (character, end index) or None when this is not an entity."""
        text, i = self.text, start + 1
        if self.at(i) == "#":
            i += 1
            hexa = self.at(i) in ("x", "X") if self.strict else self.at(i) == "x"
            if hexa:
                i += 1
            digits = re.match(r"[0-9A-Fa-f]*" if hexa else r"[0-9]*", text[i:])
            assert digits is not None
            if not digits.group() or len(digits.group()) > 7:
                return None
            code = int(digits.group(), 16 if hexa else 10)
            i += len(digits.group())
            if code == 0 or code >= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                return None
            char = chr(code)
        else:
            name = re.match(r"[A-Za-z]*", text[i:])
            assert name is not None
            if name.group() not in _NAMED_ENTITIES:
                return None
            char = _NAMED_ENTITIES[name.group()]
            i += len(name.group())
        if self.at(i) == ";":
            return char, i + 1
        if self.strict:
            return None
        return char, i

    def entity(self) -> None:
        decoded = self.decode_entity(self.pos)
        if decoded is None:
            if self.strict:
                raise self.fail(f"Character entity expected at byte offset {self.byte_offset(self.pos)}")
            self.emit("&")
            self.pos += 1
            return
        char, self.pos = decoded
        self.emit(char)

    def start_tag(self) -> None:
        begin = self.pos
        i = begin + 1
        while self.at(i) and self.at(i) not in _SPACES and self.at(i) != ">":
            i += 1
        if not self.at(i):
            raise self.fail(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
        tag = self.text[begin + 1 : i].lower()
        if tag not in ALLOWED_TAGS:
            raise self.fail(f'Unsupported start tag "{tag}" at byte offset {self.byte_offset(begin)}')
        self.pos = i
        attrs = self.attributes(tag, begin)
        self.pos += 1  # the ">"
        self.open_tag(tag, attrs, begin)

    def attributes(self, tag: str, begin: int) -> dict[str, str | None]:
        attrs: dict[str, str | None] = {}
        while self.at(self.pos) != ">":
            self.skip_spaces()
            if self.at(self.pos) == ">":
                break
            if not self.at(self.pos):
                raise self.fail(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
            name_start = self.pos
            while self.at(self.pos) and self.at(self.pos) not in _SPACES + "=>":
                self.pos += 1
            name = self.text[name_start : self.pos].lower()
            self.skip_spaces()
            if self.at(self.pos) != "=":
                attrs.setdefault(name, None)  # value-less attribute, e.g. <blockquote expandable>
                continue
            self.pos += 1
            self.skip_spaces()
            attrs.setdefault(name, self.attribute_value(begin))
        return attrs

    def attribute_value(self, begin: int) -> str:
        quote = self.at(self.pos)
        if not quote:
            raise self.fail(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
        if quote not in "'\"":
            token = _NAME_TOKEN.match(self.text, self.pos)
            assert token is not None
            end = token.end()
            if not self.at(end) or (self.at(end) not in _SPACES and self.at(end) != ">"):
                raise self.fail(f"Unexpected end of name token at byte offset {self.byte_offset(self.pos)}")
            self.pos = end
            return token.group().lower()
        self.pos += 1
        value: list[str] = []
        while self.at(self.pos) and self.at(self.pos) != quote:
            if self.at(self.pos) == "&":
                decoded = self.decode_entity(self.pos)
                if decoded is not None:
                    value.append(decoded[0])
                    self.pos = decoded[1]
                    continue
            value.append(self.text[self.pos])
            self.pos += 1
        if not self.at(self.pos):
            raise self.fail(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
        self.pos += 1
        return "".join(value)

    def open_tag(self, tag: str, attrs: dict[str, str | None], begin: int) -> None:
        at = f"at byte offset {self.byte_offset(begin)}"
        argument = ""
        if tag == "span":
            if attrs.get("class") != "tg-spoiler":
                raise self.fail(f'Tag "span" must have class "tg-spoiler" {at}')
        elif tag == "a":
            href = attrs.get("href")
            if not href and self.strict:
                raise self.fail(f'Tag "a" must have non-empty attribute "href" {at}')
            argument = href or ""
        elif tag == "tg-emoji":
            emoji_id = attrs.get("emoji-id") or ""
            if not emoji_id.isdigit():
                raise self.fail(f'Tag "tg-emoji" must have valid attribute "emoji-id" {at}')
            argument = emoji_id
        elif tag == "code":
            cls = attrs.get("class") or ""
            if cls.startswith("language-") and self.stack and self.stack[-1].tag == "pre":
                argument = cls[len("language-") :]
        self.stack.append(_Open(tag, argument, self.utf16, self.byte_offset(begin), "expandable" in attrs))

    def end_tag(self) -> None:
        begin = self.pos
        if not self.stack:
            raise self.fail(f"Unexpected end tag at byte offset {self.byte_offset(begin)}")
        i = begin + 2
        while self.at(i) and self.at(i) not in _SPACES and self.at(i) != ">":
            i += 1
        name = self.text[begin + 2 : i].lower()
        self.pos = i
        self.skip_spaces()
        if self.at(self.pos) != ">":
            raise self.fail(f"Unclosed end tag at byte offset {self.byte_offset(begin)}")
        self.pos += 1
        top = self.stack[-1]
        if name and name != top.tag:
            raise self.fail(
                f'Unmatched end tag at byte offset {self.byte_offset(begin)}, expected "</{top.tag}>", found "</{name}>"'
            )
        self.stack.pop()
        self.close(top)

    def close(self, top: _Open) -> None:
        length = self.utf16 - top.utf16_start
        if length == 0:
            return  # tdlib drops empty entities
        if top.tag == "code" and top.argument and self.stack and self.stack[-1].tag == "pre":
            # <pre><code class="language-x">: Telegram makes one "pre" entity carrying the language
            self.stack[-1].argument = top.argument
            return
        kind = _ENTITY_TYPE[top.tag]
        argument = top.argument
        if top.tag == "blockquote" and top.expandable:
            kind = "expandable_blockquote"
        self.entities.append(HTMLEntity(kind, top.utf16_start, length, argument))


def parse_html_entities(text: str, *, strict: bool = True) -> tuple[str, list[HTMLEntity]]:
    """Validate ``text`` and return the visible text and its entities (UTF-16 offsets)."""
    return _Parser(text, strict).run()


def parse_html(text: str, *, strict: bool = True) -> str:
    """Validate Telegram HTML; return the visible text (tags removed, entities unescaped).

    Raises TelegramHTMLError whose ``str`` is the description Telegram would answer with.
    """
    return _Parser(text, strict).run()[0]


def visible_length(text: str, *, strict: bool = True) -> int:
    """Length of the visible text in UTF-16 code units: the unit of Telegram's 4096 limit."""
    return _utf16_len(parse_html(text, strict=strict))
