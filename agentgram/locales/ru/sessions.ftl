# /sessions: сессии, открытые в этом чате (в форуме — по одной на тему).
# { $place } приходит экранированным: название группы (с названием темы) или sessions-topic / sessions-this-chat;
# { $when } — как «2026-03-30 09:00 (Europe/Berlin)»; { $item } — целая строка sessions-item.
sessions-title = <b>Сессии, открытые в этом чате</b>
sessions-item = • { $place } · сессия { $id }
sessions-item-last = • { $place } · сессия { $id } · последнее сообщение { $when }
sessions-here = <b>{ $item }</b> ← вы здесь
sessions-topic = тема #{ $id }
sessions-this-chat = этот чат
sessions-none = В этом чате пока нет открытой сессии.
menu-sessions = Сессии этого чата (по одной на тему)

## Сессии, запущенные другой сессией (issue 29), в чате, которому они отчитываются.
# { $name } приходит экранированным: имя сессии, иначе имя её агента; { $id } — текстом.
spawned-label = 🤖 <b>{ $name }</b> (сессия { $id })
spawned-asks = 🤖 <b>{ $name }</b> (сессия { $id }) спрашивает:
spawned-no-answer = 🤖 <b>{ $name }</b> (сессия { $id }): ответа пока нет.
spawned-finished = Сессия { $id } завершена и больше не читает сообщений.
spawned-finished-short = Сессия { $id } завершена.
spawned-title = <b>Сессии, запущенные из этой</b>
spawned-card = 🤖 <b>{ $name }</b> (сессия { $id }): { $status }
spawned-card-last = 🤖 <b>{ $name }</b> (сессия { $id }): { $status } · активна { $when }
spawned-status-idle = ждёт
spawned-status-running = работает
spawned-status-waiting-approval = ждёт решения
spawned-status-paused = на паузе
spawned-status-finished = завершена
btn-spawned-open = 📖 Открыть
btn-spawned-stop = ⏹ Остановить
btn-spawned-close = ✖️ Закрыть
spawned-stopped = Сессия { $id } остановлена.
spawned-not-running = Сессия { $id } ничего не делала.
spawned-closed = Сессия { $id } закрыта.
spawned-gone = В этом чате нет такой сессии.
stopped-spawned = { $count ->
        [0] Ни одна сессия, запущенная из этой, не работала.
        [one] ⏹ Остановлена { $count } сессия, запущенная из этой.
        [few] ⏹ Остановлены { $count } сессии, запущенные из этой.
       *[many] ⏹ Остановлено { $count } сессий, запущенных из этой.
        [other] ⏹ Остановлено { $count } сессии, запущенной из этой.
    }
