# agentgram — English chat strings.
#
# Messages are Telegram HTML: only <b>, <i>, <u>, <s>, <code>, <pre>, <a>,
# <blockquote> tags; a literal <, > or & must be written &lt; &gt; &amp;.
# Parameters arrive already escaped by the caller.
# Every key here must also exist in every other locale (tests/runtime/test_i18n.py).

## Start, help, access

start-greeting =
    👋 Hi! I'm <b>agentgram</b>, your personal AI agent.

    Just write to me as you would to a person. I can read and write files and run commands in my working folder — anything that changes something waits for your approval first.
# $web: "on" lists /trace (the web view is enabled), "off" leaves it out.
help-text =
    <b>Commands</b>
    /start — about me
    /help — this list
    /new — start a fresh conversation
    /stop — stop what I'm doing right now (/stop all: and the sessions I started)
    /pause — pause after the current step
    /resume — continue a paused task
    /approvals — requests waiting for your decision
    /trust — what I may do without asking
    /tic — my periodic self check-ins
    /cron — scheduled tasks
    /model — choose the model
    /sessions — the sessions open in this chat, and those I started
    /rollback — undo the file changes of a recent turn
    /cost — tokens and cost of this conversation
    /todos — my todo list for this conversation
    /jobs — commands running in the background
    /skills — procedures I can load
    /mcp — tool servers and their state
    /search — find something we talked about
    /context — how full my memory of this chat is
    /compact — summarise older messages now{ $web ->
        [on] {""}
            /trace — this conversation in the web view
       *[off] {""}
    }

    <b>Besides text</b>
    📷 photos — I look at them
    🎙 voice notes, audio, video notes — I transcribe them and show you what I heard
    📎 files — saved in my working folder, where I read them
    I can send files back, too.
not-allowed = This is a private bot. Your Telegram user id is <code>{ $id }</code>.
pairing-asked =
    This is a private bot. Your Telegram user id is <code>{ $id }</code>.

    I've asked the owner to let you in. Send them this code so they know the request is yours: <code>{ $code }</code>
pairing-request =
    👤 User <code>{ $id }</code> ({ $user }) asks to use the bot.
    Code: <code>{ $code }</code>
pairing-request-approved = ✅ User <code>{ $id }</code> ({ $user }) can use the bot now.
pairing-request-denied = ❌ User <code>{ $id }</code> ({ $user }) was refused.
pairing-welcome = ✅ The owner let you in. Send your message again and I'll answer.
pairing-refused = The owner declined your request.
group-not-enabled = I'm not enabled in this group. My owner can turn me on here by adding its id <code>{ $id }</code> to <code>telegram.groups.allowed_chat_ids</code>.
unsupported-content = I read text, photos, voice notes and files — not this kind of message, sorry. Please send it another way.
unknown-command = I don't know that command.
quiet-hours-digest-header = 🌙 <b>While you were away</b>

## Conversation control

new-session = 🆕 Fresh conversation started. I've forgotten our previous chat.
stopped = ⏹ Stopped.
stopped-dropped =
    ⏹ Stopped. { $count ->
        [one] { $count } queued message was dropped.
       *[other] { $count } queued messages were dropped.
    }
nothing-to-stop = Nothing to stop — I'm idle.
paused = ⏸ Paused. I'll hold here until you send /resume.
resumed = ▶️ Resuming.
nothing-to-resume = Nothing to resume.
pausing = ⏸ I'll pause at my next step (a running tool finishes first). If I finish before that, you just get the answer.
nothing-to-pause = Nothing to pause — I'm idle.
noted-busy = 📝 Noted — I'll read this at my next step.
noted-busy-after = ⏭ Noted — I'll start on this once I finish.
btn-queued-now = ⚡ Now
btn-queued-after = ⏭ After
btn-queued-cancel = 🗑 Cancel
queued-now = ⚡ Stopping to start on this now.
queued-after = ⏭ Will run next, once I finish.
queued-cancelled = 🗑 Cancelled — I won't read it.
queued-folded = 📝 Folded in at step { $step }.
queued-already-read = Already read at step { $step } — nothing changed.
queued-already-cancelled = Already cancelled — nothing changed.
queued-gone = This button no longer works.
noted-waiting-approval = 📝 Noted — but my next step waits for your decision on <code>{ $tool }</code>. Tap a button on the approval request, or reply to it with a reason to reject it.
mailbox-full = ⚠️ Too many unread messages — please wait for me to catch up, or send /stop.
restarted-continuing = 🔄 Restarted — continuing your last request.

## Model and turn status

thinking = 💭 Thinking…
model-fallback = ⚠️ { $failed } isn't responding, switching to { $next }.
llm-error = ⚠️ The model failed: { $error }
turn-exhausted = ⚠️ I made { $rounds } tool calls in a row without reaching an answer, so I stopped. Tell me how to continue.
turn-failed = ⚠️ Something went wrong on my side; the details are in the log.
llm-unavailable = ⚠️ The model is not answering{ $status ->
        [0] {""}
       *[other] {" "}(HTTP { $status })
    } — send your message again in a moment.
llm-timeout = ⚠️ The model took too long to answer — send your message again in a moment.
llm-rate-limited = ⚠️ The model is rate-limited (HTTP 429) — wait a minute, then send your message again.
llm-auth-failed = ⚠️ The LLM endpoint refused the API key (HTTP { $status }) — check llm.api_key in the config.
llm-model-not-found = ⚠️ The LLM endpoint has no model “{ $model }” (HTTP 404) — check llm.model and llm.base_url in the config.
llm-context-too-long = ⚠️ This conversation is too long for the model — send /new to start a fresh one.
llm-bad-request = ⚠️ The model refused my request (HTTP { $status }); the details are in the log. If it happens again, send /new to start a fresh conversation.
llm-unreachable = ⚠️ I can't reach the LLM endpoint — check that it is running and that llm.base_url is right, then send your message again.
llm-stream-cut = ⚠️ The model's answer broke off — send your message again.
tool-running = ⏳ <code>{ $tool }</code>…
tool-done = ✅ <code>{ $tool }</code>
tool-failed = ❌ <code>{ $tool }</code> failed
tool-rejected = 🚫 <code>{ $tool }</code> rejected
tool-cancelled = ⏹ <code>{ $tool }</code> cancelled
tool-interrupted = ⚠️ interrupted
output-truncated = … (output truncated)

## Approvals

approval-title = 🔐 <b>Approval needed</b>
approval-command = Run a command in <code>{ $workdir }</code>:
approval-file = Change file <code>{ $path }</code>:
approval-new-file = (new file)
approval-diff-cut = … (cut short — the full text is attached)
approval-no-change = (no change: the file already has exactly this content)
approval-empty-file = (an empty file)
approval-args = Call <code>{ $tool }</code> with:
# A call that only reads a path, in words; $outside is "yes" beyond the workdir, else "no".
approval-read-file = { $outside ->
    [yes] Read a file outside the workdir: <code>{ $path }</code>
   *[no] Read a file: <code>{ $path }</code>
}
approval-list-dir = { $outside ->
    [yes] List a folder outside the workdir: <code>{ $path }</code>
   *[no] List a folder: <code>{ $path }</code>
}
approval-send-file = { $outside ->
    [yes] Send you a file from outside the workdir: <code>{ $path }</code>
   *[no] Send you a file: <code>{ $path }</code>
}
approval-read = { $outside ->
    [yes] Read outside the workdir with <code>{ $tool }</code>: <code>{ $path }</code>
   *[no] Read with <code>{ $tool }</code>: <code>{ $path }</code>
}
btn-approve = ✅ Approve
btn-reject = ❌ Reject
btn-deny = ❌ Deny
btn-trust-15 = ⏱ 15 min
btn-trust-always = 🔁 Always
approval-approved = ✅ Approved
approval-rejected = ❌ Rejected
approval-rejected-reason = ❌ Rejected: { $reason }
approval-cancelled = ⏹ Cancelled
approval-expired = ⌛ Expired
approval-not-shown = ⚠️ I couldn't show the approval request for <code>{ $tool }</code> here, so it was not run.
approval-stale = This request is no longer pending.
approval-not-yours = This button isn't for you.
approval-only-requester = Only { $name } can decide this.
approval-unknown-button = This button no longer works.
approval-reply-hint = To reject with a reason, reply to this message.
approvals-none = Nothing is waiting for your approval.
approvals-list-header = <b>Waiting for your approval</b>

## Trust

trust-none = I ask before anything that changes something — no standing permissions.
trust-header = <b>What I may do without asking</b>
trust-revoked = Permission revoked.
trust-always-confirm = 🔁 Always allow <code>{ $rule }</code> without asking?
trust-always-saved = 🔁 Saved: I won't ask about <code>{ $rule }</code> any more.
trust-bypass-on = ⏱ I won't ask about { $scope } for { $minutes } min.
trust-bypass-until = ⏱ { $scope } — no approval asked until { $until }
scope-all = anything
scope-fs_read = reading files
scope-fs_read_outside = reading files outside my working folder
scope-fs_write = file changes
scope-shell = shell commands
scope-schedule = scheduled tasks
scope-other = other tools
scope-tool = “{ $tool }” calls
btn-revoke = 🗑 Revoke

## Tic (periodic check-ins)

tic-report-header = 🕰 <b>Check-in</b>
tic-status =
    <b>Check-ins:</b> { $enabled }
    Schedule: { $schedule }
    Next: { $next }
    Last: { $last }
tic-on = 🕰 Check-ins are on.
tic-off = 🕰 Check-ins are off.
tic-interval-set = 🕰 I'll check in { $schedule }.
tic-started = 🕰 Running a check-in now.
state-on = on
state-off = off
tic-never = never
tic-report-title = 🕰 Check-in
tic-nothing-to-do = 🕰 Nothing to check: TIC.md is empty, there is no tic.prompt and nothing happened since the last check-in.
tic-deferred = 🕰 I'll check in as soon as the current request is done.
tic-bad-interval = ⚠️ I can't set that interval: { $error }
tic-usage = Use /tic for the status, or /tic now, /tic on, /tic off, /tic every 45m.
tic-last = { $when } — { $result }
tic-result-reported = reported
tic-result-silent = nothing to report
tic-result-skipped = skipped ({ $reason })
tic-result-skipped-plain = skipped
tic-reason-nothing-to-do = nothing to do
tic-reason-quiet-hours = quiet hours
tic-result-deferred = waited for your request to finish
tic-result-failed = failed
tic-result-running = running

## Cron (scheduled tasks)

cron-result-title = ⏰ { $title }
cron-no-output = (no output)
cron-failed = ⚠️ Scheduled task <b>{ $title }</b> failed: { $error }
cron-list-header = <b>Scheduled tasks</b>
cron-none = No scheduled tasks yet. Ask me to schedule something, e.g. “every morning at 9 send me the weather”.
cron-added = ⏰ Scheduled “{ $title }” (<code>{ $id }</code>): { $schedule }. Next run: { $next }.
cron-bad-schedule = ⚠️ I can't schedule that: { $error }
cron-killed = ⏹ Stopped “{ $title }” (<code>{ $id }</code>).
cron-not-running = “{ $title }” (<code>{ $id }</code>) isn't running right now.
cron-deleted = 🗑 “{ $title }” deleted.
cron-paused = ⏸ “{ $title }” paused.
cron-resumed = ▶️ “{ $title }” resumed.
cron-finished = “{ $title }” has finished — there is nothing to resume.
cron-confirm-delete = 🗑 Delete the task “{ $title }” (<code>{ $id }</code>)? This can't be undone.
cron-card-deleted = 🗑 Deleted: { $title }
cron-card-gone = 🗑 Deleted
cron-not-found = No such task.
cron-usage = Use /cron to list tasks, /cron add &lt;schedule&gt; &lt;prompt&gt; (e.g. <code>/cron add every 2h check the build</code>) or /cron kill &lt;id&gt;.
cron-add-usage =
    To schedule a task, write /cron add, the schedule, then what to do. For example:
    <code>/cron add every 2h check the build</code>
    <code>/cron add 0 9 * * 1-5 summarise my inbox</code>
    <code>/cron add at 18:30 remind me to call Anna</code>
    <code>/cron add in 20m take the cake out</code>
cron-item =
    { $state } <b>{ $title }</b> · <code>{ $id }</code>
    { $schedule }
    { $when }
cron-when-next = Next run: { $next }
cron-when-paused = Paused.
cron-when-done = Finished: no runs left.
cron-next-none = —
cron-run-started = ▶️ Running “{ $title }” now.
cron-already-running = “{ $title }” is already running.
cron-run-failed = ⚠️ This run didn't finish; the details are in the log.
quiet-hours-digest-title = 🌙 While you were away ({ $count })
btn-run-now = ▶️ Run now
btn-pause = ⏸ Pause
btn-resume = ▶️ Resume
btn-delete = 🗑 Delete
btn-confirm = ✅ Yes
btn-cancel = ✖️ Cancel

## How times, schedules and schedule errors read

time-in-zone = { $time } ({ $zone })
span-days = { $count } d
span-hours = { $count } h
span-minutes = { $count } min
span-seconds = { $count } s
schedule-every = every { $span }
schedule-cron = <code>{ $expr }</code> (cron, { $zone })
schedule-once = once, { $when }
schedule-error-empty = the schedule is missing. Use a crontab such as <code>0 9 * * 1-5</code>, or <code>every 2h</code>, <code>at 2026-12-01 09:00</code>, <code>in 20m</code>.
schedule-error-nothing = write a schedule and what to do, e.g. <code>/cron add every 2h check the build</code>.
schedule-error-no-prompt = after the schedule <code>{ $spec }</code>, write what to do.
schedule-error-macro = <code>{ $spec }</code> is not a known cron shortcut (known: { $names }).
schedule-error-duration = in <code>{ $spec }</code>, <code>{ $value }</code> is not a length of time (e.g. <code>2h</code>, <code>45m</code>).
schedule-error-no-duration = <code>{ $spec }</code> needs a length of time, e.g. <code>every 2h</code> or <code>in 20m</code>.
schedule-error-too-frequent = <code>{ $spec }</code> is too often — the shortest interval is { $shortest }.
schedule-error-not-positive = in <code>{ $spec }</code>, the delay must be more than zero.
schedule-error-at = in <code>{ $spec }</code>, write the time as <code>at YYYY-MM-DD HH:MM</code> or <code>at HH:MM</code>.
schedule-error-no-such-date = <code>{ $spec }</code> is not a real date and time.
schedule-error-skipped-time = in <code>{ $spec }</code>, { $time } does not exist in { $zone } (the clocks skip it).
schedule-error-past = <code>{ $spec }</code> is in the past (it is now { $now }).
schedule-error-fields = <code>{ $spec }</code> is not a schedule: a crontab has 5 fields (minute hour day month weekday), this has { $count }. Or use <code>every 2h</code>, <code>at 18:30</code>, <code>in 20m</code>.
schedule-error-seconds = <code>{ $spec }</code> has { $count } fields: a crontab has 5 (minute hour day month weekday); seconds and years are not supported.
schedule-error-crontab = <code>{ $spec }</code> is not a valid crontab: check each field (minute 0–59, hour 0–23, day 1–31, month 1–12, weekday 0–7 or mon–sun).
schedule-error-never = <code>{ $spec }</code> never fires.
schedule-error-zone = unknown time zone <code>{ $zone }</code> (use an IANA name such as <code>Europe/Berlin</code>).

## The command menu (setMyCommands)

menu-new = Start a fresh conversation
menu-stop = Stop what I'm doing
menu-pause = Pause at my next step
menu-resume = Continue a paused request
menu-approvals = Requests waiting for your approval
menu-trust = What I may do without asking
menu-tic = My periodic check-ins
menu-cron = Scheduled tasks
menu-help = What I can do
