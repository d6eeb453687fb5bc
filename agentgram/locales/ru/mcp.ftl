# MCP-серверы инструментов (mcp.servers в конфиге): /mcp и запрос подтверждения для вызова MCP
# { $name }, { $description }, { $reason } и { $tool } приходят уже экранированными;
# в approval-mcp { $name } — имя сервера.
mcp-title = 🔌 <b>MCP-серверы</b>
mcp-item = • <code>{ $name }</code>: { $status }
mcp-item-described = • <code>{ $name }</code> — { $description }: { $status }
mcp-running = 🟢 работает
mcp-stopped = ⚪ остановлен
mcp-failed = 🔴 сбой: { $reason }
mcp-tools = { $count ->
    [one] { $count } инструмент
    [few] { $count } инструмента
   *[many] { $count } инструментов
}
mcp-not-started = ещё не запускался
mcp-activated = включён в этом чате
mcp-not-activated = не включён в этом чате (я включу его, когда понадобится)
mcp-none = 🔌 MCP-серверов пока нет. Добавьте сервер в <code>mcp.servers</code> моего конфига (см. «MCP servers» в README) и перезапустите меня.
menu-mcp = Серверы инструментов и их состояние
approval-mcp = Вызвать <code>{ $tool }</code> на MCP-сервере <code>{ $name }</code> с параметрами:
