# /sessions: the sessions open in this chat (in a forum, one per topic).
# { $place } arrives escaped: a group's name (with its topic's), or sessions-topic / sessions-this-chat;
# { $when } as "2026-03-30 09:00 (Europe/Berlin)"; { $item } is a whole sessions-item line.
sessions-title = <b>Sessions open in this chat</b>
sessions-item = • { $place } · session { $id }
sessions-item-last = • { $place } · session { $id } · last message { $when }
sessions-here = <b>{ $item }</b> ← here
sessions-topic = topic #{ $id }
sessions-this-chat = this chat
sessions-none = No session is open in this chat yet.
menu-sessions = This chat's sessions (one per topic)
