# MCP tool servers (mcp.servers in the config): /mcp and the approval prompt of an MCP call
# { $name }, { $description }, { $reason } and { $tool } arrive escaped;
# in approval-mcp, { $name } is the server's name.
mcp-title = 🔌 <b>MCP servers</b>
mcp-item = • <code>{ $name }</code>: { $status }
mcp-item-described = • <code>{ $name }</code> — { $description }: { $status }
mcp-running = 🟢 running
mcp-stopped = ⚪ stopped
mcp-failed = 🔴 failed: { $reason }
mcp-tools = { $count ->
    [one] { $count } tool
   *[other] { $count } tools
}
mcp-not-started = not started yet
mcp-activated = activated in this chat
mcp-not-activated = not activated in this chat (I activate it when I need it)
mcp-none = 🔌 No MCP servers yet. Add one under <code>mcp.servers</code> in my config (see "MCP servers" in the README), then restart me.
menu-mcp = Tool servers and their state
approval-mcp = Call <code>{ $tool }</code> on MCP server <code>{ $name }</code> with:
