"""The built-in tools, in the order the model sees them."""

from __future__ import annotations

from typing import Any

from agentgram.runtime.capabilities.tools.base import Tool, ToolRegistry
from agentgram.runtime.capabilities.tools.files import EditFile, ListDir, ReadFile, WriteFile
from agentgram.runtime.capabilities.tools.shell import ExecuteCmd


def builtin_tools() -> list[Tool[Any]]:
    """Fresh instances of read_file, list_dir, write_file, edit_file, execute_cmd."""
    return [ReadFile(), ListDir(), WriteFile(), EditFile(), ExecuteCmd()]


def default_registry() -> ToolRegistry:
    """A registry holding exactly the built-in tools."""
    return ToolRegistry(builtin_tools())
