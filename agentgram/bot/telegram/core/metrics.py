"""The Telegram adapter's metrics, registered in the runtime's :data:`~runtime.metrics.REGISTRY`.

* ``agentgram_telegram_api_calls_total{method, result}``: every HTTP request to the Bot
  API, counted by the driver where every one passes (:func:`count_call`: python-telegram-bot's
  request layer, aiogram's session middleware), the ingest's raw ``getUpdates`` included.
  ``result`` is ``ok`` (2xx),
  ``429``, ``5xx``, ``4xx`` (any other refusal), ``timeout`` or ``error`` (no answer:
  connection refused, reset). Each retry is a call of its own; a file download is
  ``method="file"`` (its URL is a file path, no method name).
* ``agentgram_telegram_send_retries_total``: a send retried after a transient failure
  (:func:`bot.telegram.core.chat_queue.with_retry`, the one retry loop of the outbox and handlers).
* ``agentgram_telegram_outbox_depth``: events queued in the per-chat outboxes, not yet
  delivered (read from :class:`~bot.telegram.delivery.Delivery` at scrape time).
* ``agentgram_telegram_polling_lag_seconds``: seconds since the last successful
  ``getUpdates`` answer (``Ingest.last_poll_ok``, which the health check reads too).
  Chosen over the age of the newest update, which needs an update to arrive and trusts
  Telegram's clock: this one also rises while nobody writes, but long polling answers at
  least every ``telegram.poll_timeout`` seconds, so a value well beyond that means polling
  is failing. ``NaN`` before the first answer.

The gauges are read from the last bot built in the process (:func:`watch`); one process
runs one bot.
"""

from __future__ import annotations

import math
import time
import weakref
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge

from agentgram.runtime.infra.metrics import REGISTRY

if TYPE_CHECKING:
    from agentgram.bot.telegram.core.ingest import Ingest
    from agentgram.bot.telegram.views.delivery import Delivery

API_CALLS = Counter(
    "agentgram_telegram_api_calls",
    "Bot API requests, by method and result (ok, 429, 5xx, 4xx, timeout, error).",
    ["method", "result"],
    registry=REGISTRY,
)
SEND_RETRIES = Counter(
    "agentgram_telegram_send_retries",
    "Sends to Telegram retried after a transient failure (429, 5xx, timeout, network).",
    registry=REGISTRY,
)
OUTBOX_DEPTH = Gauge(
    "agentgram_telegram_outbox_depth",
    "Events queued in the per-chat outboxes, not yet delivered.",
    registry=REGISTRY,
)
POLLING_LAG = Gauge(
    "agentgram_telegram_polling_lag_seconds",
    "Seconds since the last successful getUpdates answer (NaN before the first).",
    registry=REGISTRY,
)


def result_of(status: int) -> str:
    """An HTTP status as the ``result`` label."""
    if 200 <= status < 300:
        return "ok"
    if status == 429:
        return "429"
    return "5xx" if status >= 500 else "4xx"


def count_call(method: str, result: str) -> None:
    """One Bot API request and its ``result`` label (:func:`result_of`, ``timeout`` or ``error``)."""
    API_CALLS.labels(method=method, result=result).inc()


def watch(delivery: Delivery, ingest: Ingest) -> None:
    """Read the gauges from this bot's parts at scrape time, holding them weakly (a stopped bot
    is not kept alive); the last bot built in a process is the one watched."""
    outboxes, polls = weakref.ref(delivery), weakref.ref(ingest)

    def depth() -> float:
        watched = outboxes()
        return 0.0 if watched is None else float(watched.queued())

    def lag() -> float:
        watched = polls()
        last = None if watched is None else watched.last_poll_ok
        return math.nan if last is None else time.monotonic() - last

    OUTBOX_DEPTH.set_function(depth)
    POLLING_LAG.set_function(lag)
