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
