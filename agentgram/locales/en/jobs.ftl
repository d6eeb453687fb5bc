# Long-running commands: a detached call's live status line, its ⏹ button, and /jobs.
# { $command } arrives as <code>…</code>, escaped; { $elapsed } as "2 min 10 s".
jobs-running = ⚙️ { $command } running · { $elapsed }
jobs-finished = ✅ { $command } finished · { $elapsed }
jobs-failed = ❌ { $command } failed · { $elapsed }
jobs-cancelled = ⏹ { $command } cancelled · { $elapsed }
jobs-orphaned = ⚠️ { $command } interrupted by a restart
jobs-stop = ⏹ Stop
jobs-stop-numbered = ⏹ { $number }
jobs-toast-stopping = Stopping…
jobs-toast-gone = That command is no longer running.
jobs-title = <b>Running commands</b>
jobs-item = { $number }. ⚙️ { $command } · { $elapsed }
jobs-none = No commands are running.
menu-jobs = Commands running in the background
