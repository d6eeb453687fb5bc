# /context and /compact (bot/telegram/handlers/context.py)
menu-context = How full my memory of this chat is
menu-compact = Summarise older messages now
context-tokens = 🧠 Next request: about <b>{ $tokens }</b> tokens ({ $how }).
context-measured = as the model reported
context-estimated = estimated from the text
context-messages = Messages sent in full: { $messages }
context-threshold = Compaction at { $threshold } tokens, keeping the { $keep } newest messages.
context-compaction-off = Compaction is off (set <code>llm.compaction.threshold_tokens</code> to turn it on).
context-no-summary = No summary yet: the whole conversation is sent.
context-summary = 📝 A summary stands for the { $rows } oldest messages, up to { $until }; made { $made }.
compact-done = 📝 Done: { $rows } older messages are now a summary.
compact-nothing = Nothing to summarise yet: the conversation is short.
compact-failed = ⚠️ The summary could not be made (the model did not answer). Nothing was changed.
compact-busy = I'm working on a request; I'll summarise by myself when I need to.
compact-off = Compaction is off. Set <code>llm.compaction.threshold_tokens</code> in config.yml to use it.
