"""Every user-facing chat string, looked up by key in Fluent files.

The strings live in ``locales/<lang>/*.ftl`` (Project Fluent syntax); this
module owns loading them and the lookup rule, so no other code decides what
happens when a translation is missing:

1. the key in the requested language;
2. else the key in the default language;
3. else the key itself, with one logged warning per key.

The runtime words nothing itself (it publishes events and notice keys); the
chat adapters look strings up here, so every adapter shares one set. Messages
may hold the small HTML subset chat clients render (``<b>``, ``<code>``).
Parameters are inserted verbatim: the caller escapes anything that came from
outside. Bundles are built with ``use_isolating=False`` because Unicode
isolation marks around placeables would show up as junk in a chat (and break
``<code>`` copying).

A malformed ``.ftl`` file fails loudly at start-up with a :class:`ConfigError`
instead of silently dropping the broken messages, as Fluent itself would.

A file is parsed once per process (:func:`_parsed`, keyed by its text): ``agentgram run`` makes a
translator to check ``locale.default`` and another for the adapter, and parsing every locale is
≈0.12 s of start-up (issue 31). The bundles share the parsed trees, which Fluent only reads (it
compiles a message into objects of its own on first use).

Every file is parsed and checked at start, but a language's bundle is made when a message with a
placeable is first formatted in it: making one loads Babel's data for its locale (plural rules,
number formats), ≈ 1.4 MiB for Russian and ≈ 3.9 MiB for English with the root locale. A message
of plain text (the command menus, most notices) is its text, read from the parsed tree, as Fluent
would format it.
"""

from __future__ import annotations

import importlib.resources
from functools import lru_cache
from pathlib import Path

from fluent.runtime import FluentBundle, FluentResource
from fluent.syntax import ast

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.log import get_logger

log = get_logger("i18n")


def _locales_dir() -> Path:
    """``agentgram/locales``: package data of the top package, in the tree and in a wheel alike."""
    return Path(str(importlib.resources.files("agentgram"))) / "locales"


DEFAULT_LOCALES_DIR = _locales_dir()

Param = str | int


@lru_cache(maxsize=256)
def _parsed(text: str) -> ast.Resource:
    """A Fluent file's parsed tree, once per text (see the module docstring)."""
    return FluentResource(text)


class Translator:
    """Loads every locale under ``locales_dir`` once and formats messages."""

    def __init__(self, locales_dir: Path | None = None, default: str = "en") -> None:
        self._dir = locales_dir or DEFAULT_LOCALES_DIR
        self._resources: dict[str, list[ast.Resource]] = {}
        self._bundles: dict[str, FluentBundle] = {}
        self._keys: dict[str, set[str]] = {}
        self._plain: dict[str, dict[str, str]] = {}  # lang -> key -> the text of a message without placeables
        self._warned: set[str] = set()
        lang_dirs = sorted(p for p in self._dir.iterdir() if p.is_dir()) if self._dir.is_dir() else []
        for lang_dir in lang_dirs:
            files = sorted(lang_dir.glob("*.ftl"))
            if files:
                self._load(lang_dir.name, files)
        if default not in self._keys:
            raise ConfigError("locale.default", f"no translations for {default!r} in {self._dir}")
        self.default = default
        # Lower-cased lookup so "RU" and "ru_RU" resolve like "ru".
        self._by_lower = {lang.lower(): lang for lang in self._keys}

    def _load(self, lang: str, files: list[Path]) -> None:
        resources: list[ast.Resource] = []
        keys: set[str] = set()
        plain: dict[str, str] = {}
        for path in files:
            resource = _parsed(path.read_text(encoding="utf-8"))
            for entry in resource.body:
                if isinstance(entry, ast.Junk):
                    junk = (entry.content or "").strip()
                    first = junk.splitlines()[0] if junk else ""
                    raise ConfigError("locale", f"{path}: cannot parse Fluent entry near {first!r}")
                if isinstance(entry, ast.Message):
                    if entry.id.name in keys:
                        raise ConfigError("locale", f"{path}: duplicate key {entry.id.name!r}")
                    keys.add(entry.id.name)
                    text = _plain_text(entry)
                    if text is not None:
                        plain[entry.id.name] = text
            resources.append(resource)
        self._resources[lang] = resources
        self._keys[lang] = keys
        self._plain[lang] = plain

    def _bundle(self, lang: str) -> FluentBundle:
        """``lang``'s bundle, made on its first use (see the module docstring)."""
        bundle = self._bundles.get(lang)
        if bundle is None:
            bundle = FluentBundle([lang], use_isolating=False)
            for resource in self._resources[lang]:
                bundle.add_resource(resource)
            self._bundles[lang] = bundle
        return bundle

    def languages(self) -> list[str]:
        return sorted(self._keys)

    def keys(self, lang: str) -> set[str]:
        return set(self._keys.get(self.resolve(lang), set()))

    def resolve(self, language_code: str | None) -> str:
        """Map a chat client's ``language_code`` (IETF tag, e.g. ``ru-RU``) to a loaded locale."""
        if not language_code:
            return self.default
        code = language_code.strip().replace("_", "-").lower()
        if code in self._by_lower:
            return self._by_lower[code]
        primary = code.split("-", 1)[0]
        return self._by_lower.get(primary, self.default)

    def t(self, lang: str | None, key: str, **params: Param) -> str:
        """Format ``key`` for ``lang``; see the module docstring for the fallback rule."""
        resolved = self.resolve(lang)
        for candidate in (resolved, self.default):
            plain = self._plain[candidate].get(key)
            if plain is not None:
                return plain
            if key in self._keys[candidate]:
                bundle = self._bundle(candidate)
                message = bundle.get_message(key)
                if message.value is None:
                    continue
                text, errors = bundle.format_pattern(message.value, params)
                for error in errors:
                    # Fluent still returns text (a missing $name shows as "name"); say why, once.
                    self._warn_once(f"formatting {key!r} in {candidate!r}: {error}")
                return str(text)
        self._warn_once(f"missing translation key {key!r}")
        return key

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning(message)


def _plain_text(message: ast.Message) -> str | None:
    """The message's text if its value is text alone (no placeable), else ``None``."""
    if message.value is None:
        return None
    elements = message.value.elements
    if not all(isinstance(element, ast.TextElement) for element in elements):
        return None
    return "".join(element.value for element in elements)  # type: ignore[union-attr]
