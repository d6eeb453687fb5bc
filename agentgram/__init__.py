"""agentgram: the distribution namespace (bot/ and runtime/ live at the top of the source tree)."""

import sys

# httpx imports its command-line client (``httpx._main``: Rich, click, Pygments) whenever they are
# installed, and Rich is, for ``agentgram chat``. agentgram never runs that client, so the module is
# marked absent (``None`` in ``sys.modules``: importing it raises ImportError) and httpx falls back
# to its stub ``main``: Rich then loads with the terminal chat only (issue 31, load only what is
# used). A process that imported httpx before agentgram keeps its client.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
