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

## Sessions another session spawned (issue 29), in the chat they report to.
# { $name } arrives escaped: the session's name, else its agent's; { $id } as text.
spawned-label = 🤖 <b>{ $name }</b> (session { $id })
spawned-asks = 🤖 <b>{ $name }</b> (session { $id }) asks:
spawned-no-answer = 🤖 <b>{ $name }</b> (session { $id }): no answer yet.
spawned-finished = Session { $id } has finished: it reads no more messages.
spawned-finished-short = Session { $id } has finished.
spawned-title = <b>Sessions started from this one</b>
spawned-card = 🤖 <b>{ $name }</b> (session { $id }): { $status }
spawned-card-last = 🤖 <b>{ $name }</b> (session { $id }): { $status } · last active { $when }
spawned-status-idle = idle
spawned-status-running = working
spawned-status-waiting-approval = waiting for approval
spawned-status-paused = paused
spawned-status-finished = finished
btn-spawned-open = 📖 Open
btn-spawned-stop = ⏹ Stop
btn-spawned-close = ✖️ Close
spawned-stopped = Session { $id } stopped.
spawned-not-running = Session { $id } was not working.
spawned-closed = Session { $id } closed.
spawned-gone = No such session in this chat.
stopped-spawned = { $count ->
        [0] No session started from this one was working.
        [one] ⏹ Stopped { $count } session started from this one.
       *[other] ⏹ Stopped { $count } sessions started from this one.
    }
