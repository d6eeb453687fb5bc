"""agentgram's platform-neutral session runtime.

Everything here is independent of any chat platform: the session mailbox, the
turn loop, approvals, tools, storage and the scheduler. Chat adapters live in
``bot/`` and talk to this package only through the facade,
:class:`runtime.app.Runtime` (``async with Runtime(settings) as rt``): its
methods take and return the runtime's own frozen values, never table rows, and
its output reaches them as typed events (:mod:`runtime.events`) they subscribe
to. A chat is addressed adapter-neutrally (:class:`runtime.events.Address`: a
session, its source, the adapter's chat id). Nothing in this package may import
``bot`` or a chat library, and each package imports only those below it:
app → scheduler → sessions → turn → approvals | mailbox → tools → storage →
llm | events | prompt → config | i18n | tasks → errors | log
(``[tool.importlinter]`` in ``pyproject.toml``).
"""
