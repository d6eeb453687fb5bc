"""The configuration reference, generated from the models: ``docs/reference/configuration.md``.

``agentgram config-reference`` (or ``python -m agentgram.bot.config_reference``)
writes it; ``--check`` exits 1 when the file differs from what the models say
(``tests/bot/test_config_reference.py`` does the same, and also holds
``config.example.yml`` to the models). One section per model of the root
(:class:`~bot.settings.AgentgramSettings`), in the file's order, a table each:
key, type, default and the field's docstring; models inside a section (a list's
entries, a mapping's values, a nested section) get a table of their own, and the
tuning knobs are listed once, under ``advanced``, where the file writes them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from datetime import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agentgram.bot.settings import AgentgramSettings
from agentgram.runtime.infra.config import ADVANCED, is_advanced, node_model

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("docs/reference/configuration.md")
HEADER = """\
# Every configuration key

<!-- Generated from the config models by `agentgram config-reference`; do not edit by hand. -->

Every key of `config.yml`, section by section, in the order of the
[example config](example-config.md): its type, its default and what it does. A key
without a default is required. Durations take seconds or `45s`, `30m`, `2h`, `1d`;
relative paths are relative to the config file's folder; any value may be
`${ENV_VAR}`, and `AGENTGRAM_SECTION__KEY=value` overrides a key.

Tuning knobs nobody should need are written under [`advanced:`](#advanced)
(`advanced.telegram.poll_timeout`); at their old place (`telegram.poll_timeout`)
they still work, with a warning.
"""


def render() -> str:
    """The whole page."""
    parts = [HEADER]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in AgentgramSettings.model_fields.items():
        section, _ = node_model(info.annotation)
        if section is None:
            continue
        parts.append(_table(name, section, info, nested, advanced=False))
        while nested:
            where, model = nested.pop(0)
            parts.append(_table(where, model, None, nested, advanced=False, level=3))
    parts.append(_advanced())
    return "\n".join(parts).rstrip("\n") + "\n"


def _advanced() -> str:
    lines = [
        f"## {ADVANCED}\n",
        "Tuning knobs: the defaults suit everyone; change one only for a measured reason.\n",
        "| Key | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for name, info in AgentgramSettings.model_fields.items():
        section, held = node_model(info.annotation)
        if section is None or held:
            continue
        for key, sub in section.model_fields.items():
            if is_advanced(sub):
                lines.append(_row(f"{ADVANCED}.{name}.{key}", sub, []))
    return "\n".join(lines) + "\n"


def _table(
    where: str,
    model: type[BaseModel],
    info: FieldInfo | None,
    nested: list[tuple[str, type[BaseModel]]],
    *,
    advanced: bool,
    level: int = 2,
) -> str:
    lines = [f"{'#' * level} {where}\n"]
    about = _text(info.description if info is not None and info.description else model.__doc__ or "")
    if about:
        lines.append(about + "\n")
    rows = [
        _row(f"{where}.{key}" if level == 2 else key, sub, nested, prefix=where)
        for key, sub in model.model_fields.items()
        if is_advanced(sub) == advanced
    ]
    if rows:
        lines += ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |", *rows]
    else:
        lines.append("Its keys are tuning knobs, written under [`advanced:`](#advanced).")
    return "\n".join(lines) + "\n"


def _row(key: str, info: FieldInfo, nested: list[tuple[str, type[BaseModel]]], *, prefix: str = "") -> str:
    model, held = node_model(info.annotation)
    if model is not None and _type(info.annotation, info.metadata).removesuffix(" or null").endswith(
        "mapping"
    ):
        child = key if "." in key else f"{prefix}.{key}"
        plain = _plain(info.annotation)
        while held and get_origin(plain) in (list, dict):  # a mapping of mappings: one <name> each
            child += "[]" if get_origin(plain) is list else ".<name>"
            plain = _plain(get_args(plain)[-1])
        if all(child != known for known, _ in nested):
            nested.append((child, model))
    cells = [f"`{key}`", _type(info.annotation, info.metadata), _default(info), _text(info.description or "")]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _plain(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` and ``| None``."""
    if get_origin(annotation) is Annotated:
        return _plain(get_args(annotation)[0])
    if _is_union(annotation):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _plain(rest[0]) if len(rest) == 1 else annotation
    return annotation


def _is_union(annotation: Any) -> bool:
    import types

    return get_origin(annotation) in (Union, types.UnionType)


VALIDATOR_TYPES = {
    "parse_duration": "duration",
    "http_url": "URL",
    "_user_path": "path",
    "memory_file": "path in memory/",
    "_not_a_username": "integer",
    "_known_rule_source": "'telegram' | 'tic' | 'cron'",
    "QuietHours.parse": "time range (HH:MM-HH:MM)",
}


def _type(annotation: Any, metadata: list[Any] | tuple[Any, ...] = ()) -> str:
    for item in metadata:
        func = getattr(item, "func", None)
        named = VALIDATOR_TYPES.get(getattr(func, "__name__", "")) or VALIDATOR_TYPES.get(
            getattr(func, "__qualname__", "")
        )
        if named:
            return named
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        return _type(base, extra)
    if _is_union(annotation):
        args = get_args(annotation)
        shown = " or ".join(_type(arg) for arg in args if arg is not type(None))
        return f"{shown} or null" if type(None) in args else shown
    if origin is Literal:
        return " | ".join(f"'{value}'" for value in get_args(annotation))
    if origin is list:
        return f"list of {_type(get_args(annotation)[0])}"
    if origin is dict:
        return f"mapping of {_type(get_args(annotation)[1])}"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "mapping"
        if issubclass(annotation, Enum):
            return " | ".join(f"'{member.value}'" for member in annotation)
        simple = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "secret string"}
        if annotation in simple:
            return simple[annotation]
        if issubclass(annotation, Path):
            return "path"
        if annotation is time:
            return "time"
    return str(annotation)


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{json.dumps(value, ensure_ascii=False)}`"


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _text(docstring: str) -> str:
    """A docstring as one line of Markdown."""
    text = " ".join(line.strip() for line in docstring.strip().splitlines())
    text = _ROLE.sub(lambda match: f"`{match.group(1)}`", text)
    return (
        text.replace("``", "`")
        .replace("`None`", "`null`")
        .replace("`True`", "`true`")
        .replace("`False`", "`false`")
    )


def write(root: Path = ROOT) -> Path:
    target = root / REFERENCE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(), encoding="utf-8")
    return target


def differs(root: Path = ROOT) -> bool:
    target = root / REFERENCE
    return not target.exists() or target.read_text(encoding="utf-8") != render()


def add_parser(sub: Any) -> None:  # argparse's _SubParsersAction is private
    cmd = sub.add_parser("config-reference", help=f"write {REFERENCE} from the config models")
    cmd.add_argument("--check", action="store_true", help="exit 1 when the file is not what the models say")
    cmd.set_defaults(entry=main)


def main(args: argparse.Namespace) -> int:
    if args.check:
        if differs():
            print(f"{REFERENCE} is out of date: run agentgram config-reference", file=sys.stderr)
            return 1
        return 0
    print(f"wrote {write()}")
    return 0


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentgram.bot.config_reference")
    parser.add_argument("--check", action="store_true")
    return main(parser.parse_args(argv))


def undocumented() -> Iterator[str]:
    """Keys whose field has no description (the reference would show an empty cell)."""
    seen: set[type[BaseModel]] = set()

    def walk(where: str, model: type[BaseModel]) -> Iterator[str]:
        if model in seen:
            return
        seen.add(model)
        for key, info in model.model_fields.items():
            if not info.description:
                yield f"{where}.{key}"
            child, _ = node_model(info.annotation)
            if child is not None:
                yield from walk(f"{where}.{key}", child)

    for name, info in AgentgramSettings.model_fields.items():
        section, _ = node_model(info.annotation)
        if section is not None:
            yield from walk(name, section)


if __name__ == "__main__":
    sys.exit(_cli())
