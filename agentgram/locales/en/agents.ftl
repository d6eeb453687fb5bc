subagent-started = 🤖 { $parent } → { $agent }
subagent-finished = ✅ { $agent } finished
subagent-failed = ❌ { $agent } did not finish
