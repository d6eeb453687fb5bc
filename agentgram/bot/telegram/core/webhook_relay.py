"""A cluster's webhook: each update relayed to the instance that runs its chat.

In a cluster (``cluster.enabled``) in webhook mode every instance serves the webhook, usually
behind one public URL whose proxy hands any update to any of them, and the instances share the
chats: each chat runs on the instance that holds its lease (:mod:`agentgram.runtime.infra.ownership`).
An instance that gets an update checks the secret and reads the body itself (a wrong secret is a
403, a body that does not parse a dead letter, an unknown update type ignored: :mod:`.webhook`),
then asks where the update's chat runs (:meth:`Relay.route`):

* here (this instance holds the chat, or has just claimed it because nobody live did): it is
  handled here;
* on another live instance: the update is POSTed to the listener that instance registered
  (``instances.relay_url``), and Telegram is answered what it answered. The owner handles it as
  if Telegram had sent it there: stored before the 200, keyed by the update (a redelivery has no
  second effect), each chat in Telegram's order (Telegram sends a chat's next update only once this
  one is answered, and the relay answers only once the owner did);
* nobody reachable (the owner died and its lease has not expired yet, or it does not answer): 503
  with ``Retry-After``; Telegram sends the update again, and once the lease expired the instance
  that gets it claims the chat.

A relayed POST carries :data:`RELAYED_HEADER`; an instance that does not run the chat answers it
503 instead of relaying it on (no second hop: a chat that moved meanwhile is found at the retry).
An update without a chat is handled where it arrives (its mail reaches the owner by ``NOTIFY``).
"""

from __future__ import annotations

import httpx

from agentgram.bot.telegram.core.webhook import SECRET_HEADER, UNAVAILABLE, Answer, Throttled
from agentgram.runtime.app import ClusterDoor
from agentgram.runtime.infra.cluster import Instance
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.webhook")

RELAYED_HEADER = "X-Agentgram-Relayed-By"
"""Names the instance that relayed a POST (the owner logs it; a non-owner refuses it)."""
RELAY_TIMEOUT = 20.0
"""Seconds the owner may take to answer a relayed update (it answers once the update is stored,
well within this; a paused owner is given up on sooner than Telegram's own ~60 s)."""


class Relay:
    """Routes each update to the instance that runs its chat (module docstring)."""

    def __init__(self, cluster: ClusterDoor, secret: str, *, timeout: float = RELAY_TIMEOUT) -> None:
        self.cluster = cluster
        self._secret = secret
        self._client = httpx.AsyncClient(timeout=timeout)
        self._failed = Throttled("webhook: relaying an update to its chat's instance failed; answered 503")
        self.relayed = 0
        """Updates another instance answered 200."""

    async def route(self, chat_id: int | None, body: bytes, relayed_by: str | None) -> Answer | None:
        """``None``: handle the update here; else the answer of the instance that runs the chat,
        or a 503 when that is nobody reachable."""
        if chat_id is None:
            return None
        try:
            place = await self.cluster.place(chat_id)
        except Exception as error:  # the database out of reach: nobody can tell where it runs
            log.warning("webhook: finding where chat %d runs failed (%s); answered 503", chat_id, error)
            return UNAVAILABLE
        if place == "here":
            return None
        if place is None or place.relay_url is None:
            log.info("webhook: chat %d runs on no reachable instance now; answered 503", chat_id)
            return UNAVAILABLE
        if relayed_by is not None:
            log.info("webhook: %s relayed chat %d here, but %s runs it; 503", relayed_by, chat_id, place.name)
            return UNAVAILABLE
        return await self._send(chat_id, place, body)

    async def _send(self, chat_id: int, owner: Instance, body: bytes) -> Answer:
        assert owner.relay_url is not None
        headers = {
            SECRET_HEADER: self._secret,
            RELAYED_HEADER: self.cluster.instance_name,
            "Content-Type": "application/json",
        }
        try:
            response = await self._client.post(owner.relay_url, content=body, headers=headers)
        except httpx.HTTPError as error:
            self.cluster.forget_place(chat_id)  # look again next time: the owner may have changed
            self._failed.warn(f" (to {owner.name}: {type(error).__name__} {error})")
            return UNAVAILABLE
        if response.status_code == 200:
            self.relayed += 1
            return Answer(200)
        self.cluster.forget_place(chat_id)
        log.info(
            "webhook: %s answered %d for chat %d; answered 503", owner.name, response.status_code, chat_id
        )
        retry = response.headers.get("Retry-After", "")
        return Answer(503, int(retry) if retry.isdigit() else UNAVAILABLE.retry_after)

    async def close(self) -> None:
        await self._client.aclose()


__all__ = ["RELAYED_HEADER", "RELAY_TIMEOUT", "Relay"]
