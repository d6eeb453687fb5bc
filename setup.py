"""Packaging beyond what pyproject.toml can say.

The sources stay where the design puts them, ``bot/`` and ``runtime/`` at the top of the tree,
and install as one distribution namespace, ``agentgram.bot`` and ``agentgram.runtime``, so the
generic names never collide with other packages in site-packages. ``agentgram/`` in the tree
holds the namespace's ``__init__`` and two symbolic links to those folders: imports, mypy and
the editable install all see the one name, with no import hooks. The top-level ``locales/``
folder ships inside the wheel as ``agentgram/runtime/locales`` (one data package per language),
found with ``importlib.resources`` (see ``agentgram.runtime.i18n``).
"""

from pathlib import Path

from setuptools import find_packages, setup

languages = sorted(d.name for d in (Path(__file__).parent / "locales").iterdir() if d.is_dir())

setup(
    packages=[
        *find_packages(include=["agentgram", "agentgram.*"]),
        "agentgram.runtime.locales",
        *(f"agentgram.runtime.locales.{lang}" for lang in languages),
    ],
    package_dir={"agentgram.runtime.locales": "locales"},
    package_data={
        **{f"agentgram.runtime.locales.{lang}": ["*.ftl"] for lang in languages},
        "agentgram.bot.web": ["templates/*.html"],  # the web view's pages
    },
)
