"""The chat adapters and the command line: everything that knows a chat platform.

Owns the ``agentgram`` command (:mod:`.cli`: ``run``, ``init``, ``doctor``,
``check-config``), the adapter's settings (:mod:`.settings`: ``telegram.*``
on top of the runtime's core :class:`~runtime.config.Settings`) and the
Telegram adapter (:mod:`.telegram`). Imports point one way: ``bot`` imports
``runtime`` — only its facade (:class:`runtime.app.Runtime`), the events it
publishes and their value types — and ``runtime`` never imports ``bot``
(``tests/test_import_contracts.py``, ``tests/test_layers.py``).
"""
