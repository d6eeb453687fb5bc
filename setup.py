"""Packaging beyond what pyproject.toml can say: the locales ship as package data.

The sources live in one package, ``agentgram/`` (``agentgram.bot``, ``agentgram.runtime``), so
imports, mypy, ruff, the editable install and the wheel all see the one name with no links and no
import hooks. ``agentgram/locales/<lang>/*.ftl`` are data files inside it, found with
``importlib.resources`` (see ``agentgram.runtime.infra.i18n``).
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["agentgram", "agentgram.*"]),
    package_data={
        "agentgram": ["locales/*/*.ftl"],
        "agentgram.bot.web": ["templates/*.html"],  # the web view's pages
        # the schema's revisions are modules (versions/*.py, a package); the template makes new ones
        "agentgram.runtime.infra.storage.alembic": ["script.py.mako"],
    },
)
