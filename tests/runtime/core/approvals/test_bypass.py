"""Session bypasses: scope, expiry, per-session, revoke and clear; never stronger than ``deny``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentgram.runtime.capabilities.tools.base import ToolGroup
from agentgram.runtime.core.approvals.bypass import BypassTable

T0 = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
MIN15 = timedelta(minutes=15)


def test_a_group_bypass_covers_the_group_until_it_expires() -> None:
    table = BypassTable()
    table.grant(1, "@shell", T0, MIN15)
    assert table.covers(1, "execute_cmd", ToolGroup.SHELL, T0 + timedelta(minutes=14))
    assert not table.covers(1, "write_file", ToolGroup.FS_WRITE, T0)
    assert not table.covers(1, "execute_cmd", ToolGroup.SHELL, T0 + MIN15)
    assert table.active(1, T0 + MIN15) == []


def test_scopes_all_group_and_one_tool() -> None:
    table = BypassTable()
    table.grant(1, "all", T0, MIN15)
    table.grant(2, "write_file", T0, MIN15)
    assert table.covers(1, "mcp__x__y", ToolGroup.OTHER, T0)
    assert table.covers(2, "write_file", ToolGroup.FS_WRITE, T0)
    assert not table.covers(2, "edit_file", ToolGroup.FS_WRITE, T0)


def test_bypasses_are_per_session() -> None:
    table = BypassTable()
    table.grant(1, "@shell", T0, MIN15)
    assert not table.covers(2, "execute_cmd", ToolGroup.SHELL, T0)


def test_granting_the_same_scope_again_extends_it_instead_of_stacking() -> None:
    table = BypassTable()
    table.grant(1, "@shell", T0, MIN15)
    table.grant(1, "@shell", T0 + timedelta(minutes=10), MIN15)
    assert [b.expires_at for b in table.active(1, T0)] == [T0 + timedelta(minutes=25)]


def test_revoke_and_clear() -> None:
    table = BypassTable()
    table.grant(1, "@shell", T0, MIN15)
    table.grant(1, "@fs_write", T0, MIN15)
    assert table.revoke(1, "@shell")
    assert not table.revoke(1, "@shell")
    assert [b.scope for b in table.active(1, T0)] == ["@fs_write"]
    table.clear(1)
    assert table.active(1, T0) == []
