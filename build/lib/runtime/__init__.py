"""agentgram's platform-neutral session runtime.

Everything here is independent of any chat platform: the session mailbox, the
turn loop, approvals, tools, storage and the scheduler. Chat adapters live in
``bot/`` and talk to this package through :class:`runtime.app.Runtime`, typed
events (:mod:`runtime.events`) and mail (:mod:`runtime.mailbox`). Nothing in
this package may import ``bot`` or a Telegram library.
"""
