"""The web view: a read-mostly window on what the agent did, served beside the chat adapter.

An adapter like :mod:`bot.telegram`, and as narrow: it reads the runtime's
facade only (``Runtime.debug``, a :class:`~runtime.debug_view.DebugView`, and
``Runtime.kill_job``) and knows no chat platform (an import-linter contract).

* :mod:`.settings` — the ``web`` config section and its token rules;
* :mod:`.auth` — the bearer token, ``?token=`` traded once for a cookie;
* :mod:`.api` — the JSON API (typed response models, OpenAPI at ``/docs``);
* :mod:`.pages` — the server-rendered pages (Jinja2, no JavaScript);
* :mod:`.app` — the FastAPI application joining them;
* :mod:`.serve` — uvicorn in this process, started and stopped with the bot.

Importing this package imports nothing heavy: the bot reads :mod:`.settings`
whether or not the web view is on.
"""
