"""Webhook ingest (``telegram.mode: webhook``): Telegram POSTs each update, and is answered 200 only
once the update's effect is committed.

python-telegram-bot's and aiogram's own webhook servers answer 200 before the update is stored, so
a crash loses it. This listener handles each update before it answers, with the very per-update
handling polling uses (:mod:`.ingest`): the driver parses it on its own, an update that does not
parse is a dead letter, an unknown type is ignored, a known one runs the dispatcher's handlers,
whose mail is stored keyed by the update (:func:`~.context.envelope_id`). Telegram keeps one queue
per chat and sends a chat's next update only after the previous one got a 2xx, so answering after
handling keeps each chat in order; different chats arrive side by side (``max_connections``).

**Answers** (the body is always empty: nothing is echoed):

* a missing or wrong ``X-Telegram-Bot-Api-Secret-Token`` (compared in constant time): 403, nothing
  read or stored, a warning at most once a minute (:class:`Throttled`);
* an instance that is stopping (:meth:`WebhookIngest.drain`): 503 with ``Retry-After``, so Telegram
  sends it again later (to this instance once restarted, or to another);
* a body that is over :data:`MAX_BODY`, not JSON, without an integer ``update_id``, or that the
  driver cannot parse: 200 and a dead letter — a 4xx would hold the chat's queue for a day;
* an update of a type agentgram does not handle: 200, ignored;
* in a cluster, a known update of a chat another instance runs: relayed to that instance, and
  answered what it answered (:mod:`.webhook_relay`); a relayed POST that reaches an instance which
  does not run the chat (it moved meanwhile): 503;
* a known update: 200 once its handlers ran. A handler that raised is looked at: when the database
  does not answer, the effect may be lost, so 503 with ``Retry-After`` (the redelivery is
  deduplicated by its key if it was stored after all); when it answers, the failure is a bug in the
  handler and the update is answered 200 as polling confirms it (a retry would fail the same way
  and block the chat).

**The deduplication key** is ``tg:<update_id>:<window>``. ``update_id``s are sequential but restart
at random after a week without updates, so an id alone could take a new update for an old one's
redelivery. The window (:func:`dedup_window`) is the UTC day of the update's message
(``YYYYMMDD``; for a press on a message Telegram no longer shows, the callback query's own unique
id). A redelivery carries the same message, so the same key; a restarted id collides with an old
update's only if both carry a message of the same day, which a week's silence rules out. Polled
updates keep the plain ``tg:<update_id>`` their stored offset relies on.

A redelivered update has no second effect: its mail (or control mail, decision…) is keyed as
above. A redelivered body that was a dead letter is stored again (as polling does after a crash
between dead letters). Dead letters record :data:`DEAD_LETTER_KEY` beside them (the port's
dead-letter call stores a source position; the webhook has none, so it names the last one).
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.ingest import is_known
from agentgram.runtime.app import Checkpoint, ClusterDoor
from agentgram.runtime.infra.log import get_logger

if TYPE_CHECKING:  # the relay imports this module's answers; the web view's reader loads late
    from agentgram.bot.telegram.core.webhook_relay import Relay
    from agentgram.runtime.debug_view import DebugView

log = get_logger("telegram.webhook")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY = 1024 * 1024
"""A body over this many bytes is not read further: a dead letter (Telegram's updates are far smaller)."""
KEPT_OF_A_BODY = 64 * 1024
"""How much of an oversized or unreadable body its dead letter keeps."""
RETRY_AFTER = 5
"""Seconds a 503 asks Telegram to wait."""
WARN_EVERY = 60.0
"""At most one warning about refused requests this often (a scan must not flood the log)."""
DEAD_LETTER_KEY = "telegram.webhook.last_dead_letter"
SOURCE = "telegram"


def dedup_window(update: Update) -> str:
    """What keys the update beside its ``update_id`` (module docstring)."""
    message = update.effective_message
    if message is not None and message.date is not None and message.date.timestamp() > 0:
        return message.date.astimezone(UTC).strftime("%Y%m%d")
    if update.callback_query is not None:
        return f"cq{update.callback_query.id}"
    return "none"


class WebhookRuntime(Protocol):
    """What the webhook needs of the runtime facade (``agentgram.runtime.app.Runtime``)."""

    @property
    def debug(self) -> DebugView: ...

    @property
    def cluster(self) -> ClusterDoor | None: ...

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """What a POST is answered: a status, and for a 503 the seconds to wait."""

    status: Literal[200, 403, 503]
    retry_after: int | None = None


OK = Answer(200)
FORBIDDEN = Answer(403)
UNAVAILABLE = Answer(503, RETRY_AFTER)

Body = Callable[[], AsyncIterator[bytes]]
"""The request's body, chunk by chunk (read only once the secret is right)."""


class Throttled:
    """One warning at most every :data:`WARN_EVERY` seconds, counting the ones held back."""

    def __init__(self, message: str) -> None:
        self.message = message
        self._last = -WARN_EVERY
        self._held = 0

    def warn(self, detail: str = "") -> None:
        """Warn now, unless one was written within :data:`WARN_EVERY` (``detail``: what this
        failure said, written when the warning is)."""
        now = time.monotonic()
        if now - self._last < WARN_EVERY:
            self._held += 1
            return
        held, self._held, self._last = self._held, 0, now
        more = f" ({held} more since the last warning)" if held else ""
        log.warning("%s%s%s", self.message, detail, more)


class WebhookIngest:
    """One POST's handling, whatever server carries it (module docstring)."""

    def __init__(
        self,
        parse: Callable[[dict[str, Any]], Update],
        process: Callable[[Update], Awaitable[None]],
        runtime: WebhookRuntime,
        secret: str,
    ) -> None:
        self.parse = parse
        self.process = process
        """The dispatcher's handlers, raising what fails (``Dispatcher.process(reraise=True)``)."""
        self.runtime = runtime
        self._secret = secret.encode()
        self._refused = Throttled("webhook: refused a request without the right secret token (403)")
        self.draining = False
        self.relay: Relay | None = None
        """Set in a cluster: an update of a chat another instance runs goes there."""
        self.last_post: datetime | None = None
        """When the last POST with the right secret came (``/healthz``)."""

    def drain(self) -> None:
        """Stopping: every later POST is a 503 (requests being handled finish)."""
        self.draining = True

    async def receive(self, secret: str | None, body: Body, relayed_by: str | None = None) -> Answer:
        """One POST's answer; ``relayed_by`` names the instance that relayed it here."""
        if secret is None or not hmac.compare_digest(secret.encode(), self._secret):
            self._refused.warn()
            return FORBIDDEN
        self.last_post = datetime.now(UTC)
        if self.draining:
            return UNAVAILABLE
        try:
            return await self._settle(*(await _read(body)), relayed_by)
        except Exception:
            if await self.runtime.debug.database_answers():
                log.exception("webhook: handling an update failed; answered 200 (a retry fails alike)")
                return OK
            log.warning("webhook: the database does not answer; the update is refused with 503")
            return UNAVAILABLE

    async def _settle(self, body: bytes, complete: bool, relayed_by: str | None) -> Answer:
        if not complete:
            return await self._dead_letter("?", f"the body is over {MAX_BODY} bytes", body)
        try:
            raw = json.loads(body)
        except ValueError as error:  # UnicodeDecodeError is one
            return await self._dead_letter("?", f"not JSON: {error}", body)
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            return await self._dead_letter("?", "no integer update_id", body)
        try:
            update = self.parse(raw)
        except Exception as error:
            return await self._dead_letter(str(update_id), f"{type(error).__name__}: {error}", body)
        if not is_known(update):
            log.debug("webhook: update %s of a type agentgram does not handle; ignored", update_id)
            return OK
        if self.relay is not None:  # a cluster: the chat may run on another instance
            chat = update.effective_chat
            relayed = await self.relay.route(chat.id if chat is not None else None, body, relayed_by)
            if relayed is not None:
                return relayed
        await self.process(replace(update, dedup_window=dedup_window(update)))
        return OK

    async def _dead_letter(self, ref: str, reason: str, body: bytes) -> Answer:
        log.warning("webhook: update %s could not be read (%s); stored as a dead letter", ref, reason)
        payload = body[:KEPT_OF_A_BODY].decode("utf-8", errors="replace")
        await self.runtime.dead_letter(SOURCE, ref, reason, payload, Checkpoint(DEAD_LETTER_KEY, ref))
        return OK


async def _read(body: Body) -> tuple[bytes, bool]:
    """The body, and whether it is whole: reading stops keeping past :data:`MAX_BODY` (the rest is
    drained, so the answer reaches a client that is still sending)."""
    kept = bytearray()
    complete = True
    async for chunk in body():
        if complete and len(kept) + len(chunk) <= MAX_BODY:
            kept += chunk
        else:
            complete = False
    return bytes(kept), complete


class WebhookHealth(BaseModel):
    """``/healthz`` on the webhook listener: 200 while the database answers and the instance is
    not stopping, else 503."""

    status: Literal["ok", "down"]
    database: Literal["ok", "down"]
    draining: bool
    role: Literal["single", "leader", "member"]
    """In a cluster the ``leader`` runs the scheduler, a ``member`` does not; both run their chats
    (:mod:`.webhook_relay`). ``single`` outside a cluster."""
    heartbeat: Literal["ok", "stale"] | None
    """In a cluster: whether this instance wrote its heartbeat within ``cluster.lease_ttl`` (a
    stale one is down: the others may take what it holds)."""
    last_post: datetime | None
    """When the last POST with the right secret came."""
    webhook_url: str | None
    """What Telegram has set (``getWebhookInfo``; ``None`` when it did not answer)."""
    pending_update_count: int | None
    last_error: str | None
    """``getWebhookInfo``'s ``last_error_message``: why Telegram's last delivery failed."""
    last_error_date: datetime | None


__all__ = [
    "DEAD_LETTER_KEY",
    "MAX_BODY",
    "RETRY_AFTER",
    "SECRET_HEADER",
    "Answer",
    "Throttled",
    "WebhookHealth",
    "WebhookIngest",
    "WebhookRuntime",
    "dedup_window",
]
