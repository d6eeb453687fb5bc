"""A standby's webhook: Telegram's POSTs relayed to the leader's listener.

In a cluster (``cluster.enabled``) one instance leads and runs every session; the others are
standbys (:mod:`agentgram.runtime.infra.lead`). In webhook mode the instances usually sit behind
one public URL, a proxy that may hand any update to any of them, so a standby serves the webhook
too: it checks the secret and reads the body as the leader would (a wrong secret is a 403, a body
that does not parse a dead letter, an unknown update type ignored: :mod:`.webhook`), and relays
each update it would handle to the listener the leader registered
(:attr:`~agentgram.runtime.infra.lead.Lead.relay_url`), answering Telegram what the leader
answered. The leader handles it as if Telegram had sent it there: stored before the 200, keyed
by the update (a redelivery has no second effect), each chat in Telegram's order (Telegram sends
a chat's next update only once this one is answered, and the relay answers only once the leader
did).

When no live instance leads (the leader died; a standby takes over within ``cluster.lease_ttl``),
or the leader does not answer, the answer is a 503 with ``Retry-After``: Telegram sends the
update again, and after the takeover the new leader handles it. A relayed POST carries
:data:`RELAYED_HEADER`; an instance that does not lead answers such a POST 503 instead of relaying
it again (a leader that has just lost the lead is not a loop).

The leader's address is looked up in the database at most every :data:`LOOKUP_EVERY` seconds; a
failed relay looks it up again at once.
"""

from __future__ import annotations

import time

import httpx

from agentgram.bot.telegram.core.webhook import SECRET_HEADER, UNAVAILABLE, Answer, Throttled
from agentgram.runtime.app import ClusterDoor
from agentgram.runtime.infra.cluster import Instance
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.webhook")

RELAYED_HEADER = "X-Agentgram-Relayed-By"
"""Names the standby that relayed a POST (the leader logs it; a non-leader refuses it)."""
LOOKUP_EVERY = 1.0
RELAY_TIMEOUT = 55.0
"""Seconds the leader may take to answer a relayed update (Telegram itself gives up at about 60)."""


class Relay:
    """Relays updates to the leader's listener (module docstring)."""

    def __init__(self, cluster: ClusterDoor, secret: str, *, timeout: float = RELAY_TIMEOUT) -> None:
        self.cluster = cluster
        self._secret = secret
        self._client = httpx.AsyncClient(timeout=timeout)
        self._leader: tuple[float, Instance | None] | None = None
        self._failed = Throttled("webhook: relaying an update to the leader failed; answered 503")
        self.relayed = 0
        """Updates the leader answered 200 (``/healthz``)."""

    async def send(self, body: bytes) -> Answer:
        """Relay one update's body: the leader's answer, or a 503 when there is nobody to ask."""
        leader = await self._lookup()
        if leader is None or leader.relay_url is None or leader.id == self.cluster.instance_id:
            log.info("webhook: no live leader to relay the update to; answered 503 (Telegram retries)")
            return UNAVAILABLE
        headers = {
            SECRET_HEADER: self._secret,
            RELAYED_HEADER: self.cluster.instance_name,
            "Content-Type": "application/json",
        }
        try:
            response = await self._client.post(leader.relay_url, content=body, headers=headers)
        except httpx.HTTPError as error:
            self._leader = None  # look again next time: the leader may have changed
            self._failed.warn(f" (to {leader.name}: {error})")  # once a minute: every POST fails alike
            return UNAVAILABLE
        if response.status_code == 200:
            self.relayed += 1
            return Answer(200)
        self._leader = None
        log.info("webhook: leader %s answered %d; answered 503", leader.name, response.status_code)
        retry = response.headers.get("Retry-After", "")
        return Answer(503, int(retry) if retry.isdigit() else UNAVAILABLE.retry_after)

    async def _lookup(self) -> Instance | None:
        now = time.monotonic()
        if self._leader is not None and now - self._leader[0] < LOOKUP_EVERY:
            return self._leader[1]
        try:
            leader = await self.cluster.leader()
        except Exception as error:  # the database out of reach: nobody to relay to for now
            log.warning("webhook: looking up the leader failed (%s)", error)
            leader = None
        self._leader = (now, leader)
        return leader

    async def close(self) -> None:
        await self._client.aclose()


__all__ = ["LOOKUP_EVERY", "RELAYED_HEADER", "Relay"]
