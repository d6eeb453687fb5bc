subagent-started = 🤖 { $parent } → { $agent }
subagent-finished = ✅ { $agent } закончил
subagent-failed = ❌ { $agent } не закончил
