# The terminal chat (agentgram chat)
terminal-welcome = <b>agentgram</b> — type a message. /help lists the commands; Ctrl-C stops a reply, twice exits.
terminal-help =
    <b>Commands</b>
    /new — start a fresh conversation
    /stop — stop what I'm doing (or press Ctrl-C)
    /pause — pause at my next step; /resume — go on
    /approvals — what waits for your approval
    /rollback — undo the file changes of a recent turn; /rollback &lt;turn&gt; — that one
    /now, /after, /cancel — for the message you sent while I work: start on it now, after this turn, or drop it
    /cron — your scheduled tasks; /cron kill &lt;id&gt; — stop a running one
    /exit — leave (or Ctrl-D, or Ctrl-C twice)
terminal-queued-hint = <i>/now — start on it now · /after — after this turn · /cancel — drop it</i>
terminal-nothing-queued = No message waits for the running turn.
terminal-unknown-command = I don't know that command.
terminal-history = <i>— earlier in this conversation —</i>
terminal-working = … working
terminal-bye = Bye.
terminal-line-failed = That line could not be handled (see the log); type another.
terminal-stopping = ⏹ Stopping. (Ctrl-C again within 2 s exits.)
terminal-interrupt-idle = Nothing to stop. (Ctrl-C again within 2 s exits.)
terminal-approval-title = 🔐 <b>Approval needed:</b> <code>{ $tool }</code>
terminal-approval-command = Run a command in <code>{ $workdir }</code>:
terminal-approval-file = Change file <code>{ $path }</code>:
terminal-approval-answer = Answer <b>y</b> to run it, <b>n</b> or <b>n &lt;reason&gt;</b> to refuse, <b>{ $minutes }m</b> to trust calls like it for { $minutes } min, <b>always</b> to save a rule.
terminal-approval-answer-no-always = Answer <b>y</b> to run it, <b>n</b> or <b>n &lt;reason&gt;</b> to refuse, <b>{ $minutes }m</b> to trust calls like it for { $minutes } min.
terminal-approval-prompt = approve? ›
terminal-approval-unclear = Answer y, n, n &lt;reason&gt;, { $minutes }m or always.
terminal-approval-unclear-no-always = Answer y, n, n &lt;reason&gt; or { $minutes }m.
terminal-approval-waiting = ⏳ <code>{ $tool }</code> { $summary } waits for your approval.
terminal-trusted = ⏱ I won't ask about <code>{ $scope }</code> for { $minutes } min.
terminal-always-saved = 🔁 Saved: I won't ask about <code>{ $tool }</code> calls like this any more.
terminal-question-prompt = answer ›
terminal-question-options = Answer with a number, or in your own words.
terminal-cron-usage = /cron lists your scheduled tasks; /cron kill &lt;id&gt; stops a running one.
terminal-cron-item = { $state } <b>{ $title }</b> · <code>{ $id }</code> · { $schedule } · next: { $next }
terminal-cron-result = ⏰ <b>{ $title }</b>
terminal-file = 📎 <code>{ $path }</code> { $caption }
terminal-call-detached = ⏳ <code>{ $tool }</code> { $summary } runs on in the background.
terminal-call-finished = <code>{ $tool }</code> { $summary }: { $status }
terminal-rollback-choose = Type <b>/rollback &lt;turn&gt;</b> to see what undoing a turn would undo.
terminal-rollback-usage = Type <b>/rollback</b> for the turns that changed files, <b>/rollback &lt;turn&gt;</b> for one of them.
terminal-rollback-answer = Answer <b>y</b> to undo, <b>n</b> to keep the files as they are.
terminal-rollback-prompt = undo? ›
terminal-rollback-diff-cut = … { $count } more lines of the diff not shown.
