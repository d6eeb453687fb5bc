"""The session hub: one worker per session consuming its mailbox in order, its states explicit
(:mod:`.state`), evicted when idle (:mod:`.hub`)."""
