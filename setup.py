"""Packaging beyond what pyproject.toml can say: the top-level ``locales/`` folder ships inside
the wheel as ``runtime/locales`` (package data, one data package per language), so a non-editable
install finds its strings with ``importlib.resources`` (see ``runtime.i18n``). Everything else is
in pyproject.toml."""

from pathlib import Path

from setuptools import find_packages, setup

languages = sorted(d.name for d in (Path(__file__).parent / "locales").iterdir() if d.is_dir())

setup(
    packages=[
        *find_packages(include=["runtime", "runtime.*", "bot", "bot.*"]),
        "runtime.locales",
        *(f"runtime.locales.{lang}" for lang in languages),
    ],
    package_dir={"runtime.locales": "locales"},
    package_data={f"runtime.locales.{lang}": ["*.ftl"] for lang in languages},
)
