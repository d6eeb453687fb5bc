"""The cluster's leader, and the fence of the instance that holds the lead.

With ``cluster.enabled`` several processes share one PostgreSQL database. One of them, the
**leader**, holds the lead: a fenced lease (:class:`~runtime.infra.cluster.Leases`, kind ``lead``)
that another instance claims once the leader's heartbeat is older than ``cluster.lease_ttl`` (a
dead or paused leader) or at once when the leader stopped gracefully (its stop releases it).

What the lead covers depends on how updates arrive:

* **Polling** (one instance receives every update): the leader does all the work. It polls, runs
  every session's turns, sends the outbox and runs the scheduler; the others are **standbys**,
  registered, beating, and waiting at start-up (:meth:`Lead.take`). A new leader starts as any
  agentgram starts after a crash: it continues the turns the old one left running, sends what the
  outbox never showed and reads the unread mail, so nothing committed is lost and no approved
  call runs twice.
* **Webhook** (every instance receives updates): the instances share the chats, each chat owned by
  one of them (:mod:`runtime.infra.ownership`); every instance starts at once (:meth:`Lead.join`)
  and the lead only says which one runs the scheduler (it is taken in the background).

**The fence.** A leader paused past its lease (``SIGSTOP``, a frozen VM) must not write once it
wakes: when polling, :meth:`Lead.fence` runs at the start of every write transaction of the
runtime's database (``Database.fence``) and checks, inside that transaction, that this instance
still holds the lead at the epoch it claimed (``FOR SHARE`` on the lease row: a takeover waits
for the write to commit, a write after a takeover fails). A failed check, or a heartbeat that
finds the instance lapsed and a lease of it taken, calls ``on_lost``: the process logs one line
and exits (:data:`EXIT_LEAD_LOST`); its service manager starts it again.

What a woken former leader can still do before its first write or heartbeat is send what it held
in memory to the chat (a stream edit, an answer whose "shown" mark then fails): the at-least-once
window docs/operations/cluster.md describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

from sqlalchemy import Connection

from agentgram.runtime.infra import metrics
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.cluster import Instance, InstanceRegistry, Leases
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.cluster_rows import LeaseKind
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.tasks import cancel_and_wait

log = get_logger("cluster")

LEAD_KEY = 0
"""The lead is one lease (kind ``lead``, key 0)."""

EXIT_LEAD_LOST = 75
"""The exit code of a leader that lost the lead (``EX_TEMPFAIL``: start me again)."""


class LeadLost(RuntimeError):
    """This instance no longer holds the lead: another instance took it over."""


def exit_now(reason: str) -> None:
    """The default ``on_lost``: one log line, then the process ends at once (no clean-up that
    could write or send anything)."""
    log.critical(
        "%s; exiting (%d) so that the service manager starts this instance as a standby",
        reason,
        EXIT_LEAD_LOST,
    )
    os._exit(EXIT_LEAD_LOST)


class Lead:
    """This instance's part in the lead: register, beat, wait for the lead, fence every write."""

    def __init__(
        self,
        db: Database,
        settings: ClusterSettings,
        *,
        on_lost: Callable[[str], None] = exit_now,
    ) -> None:
        self.settings = settings
        self.registry = InstanceRegistry.of_this_process(db, settings)
        self.on_lost = on_lost
        self.epoch: int | None = None
        """The epoch of this instance's claim of the lead (``None`` while it is a standby)."""
        self._leases: Leases | None = None
        self._beating: asyncio.Task[None] | None = None
        self._lost = False
        self.shares_chats = False
        """Webhook mode: the instances share the chats (:mod:`runtime.infra.ownership`) and the lead
        is only the scheduler's; the others are members, not standbys."""
        self.lapse_checks: list[Callable[[], Awaitable[bool]]] = []
        """Run after a heartbeat lapse besides the lead's own check: whether what else this
        instance holds is still its own (:meth:`runtime.infra.ownership.Ownership.still_holds`)."""

    @property
    def instance_id(self) -> int:
        return self.registry.id

    def registered_id(self) -> int | None:
        """This instance's id, ``None`` before it registered (what the process ledger records)."""
        return self.registry.id if self._leases is not None else None

    @property
    def instance_name(self) -> str:
        return self.registry.name

    @property
    def host(self) -> str:
        return self.registry.host

    @property
    def relay_url(self) -> str | None:
        """Where the other instances reach this one's webhook listener (``None``: polling)."""
        return self.registry.relay_url

    @relay_url.setter
    def relay_url(self, url: str | None) -> None:
        """Set by the adapter before :meth:`take` (it is registered with the instance)."""
        self.registry.relay_url = url

    def heartbeat_fresh(self) -> bool:
        """This instance wrote a heartbeat within ``cluster.lease_ttl`` (``/healthz``)."""
        return self.registry.heartbeat_fresh()

    @property
    def leases(self) -> Leases | None:
        """This instance's leases (``None`` until it registered)."""
        return self._leases

    async def leader(self) -> Instance | None:
        """The live instance that leads now, its row as it reads now (``None``: nobody live
        leads, e.g. between a leader's death and the takeover; or this instance is not
        registered yet)."""
        if self._leases is None:
            return None
        return await self._leases.live_holder(LeaseKind.LEAD, LEAD_KEY)

    @property
    def leading(self) -> bool:
        """This instance holds the lead (claimed, not released, not lost); ``False`` as a standby."""
        return self.epoch is not None and not self._lost

    async def join(self) -> None:
        """Register and start beating (once; :meth:`take` does it when not done yet)."""
        if self._leases is not None:
            return
        await self.registry.register()
        metrics.show_instance(self)  # agentgram_instance_info and agentgram_leader, read at each scrape
        self._leases = Leases(self.registry.db, self.registry.id, self.settings.lease_ttl)
        self._beating = asyncio.create_task(self._beat(), name="cluster-heartbeat")

    async def take(self) -> int:
        """Register and beat (:meth:`join`), and wait until this instance holds the lead; its epoch.

        Another instance leading, this one tries again every third of ``cluster.lease_ttl``,
        logging who leads."""
        await self.join()
        assert self._leases is not None
        scan = self.settings.lease_ttl / 3
        told: int | None = None
        delays = Backoff(min(1.0, scan), scan).delays()
        while True:
            try:
                epoch = await self._leases.claim(LeaseKind.LEAD, LEAD_KEY)
            except OSError as error:  # the server out of reach for a moment: try again
                log.warning("cluster: claiming the lead failed (%s); trying again", error)
                epoch = None
            if epoch is not None:
                self.epoch = epoch
                log.info(
                    "instance %s leads (epoch %d)%s",
                    self.registry.name,
                    epoch,
                    "" if epoch == 1 else ", taking over from the previous leader",
                )
                return epoch
            holder = await self._leases.holder(LeaseKind.LEAD, LEAD_KEY)
            if holder is not None and holder.instance_id != told:
                told = holder.instance_id
                if self.shares_chats:
                    log.info(
                        "instance %s runs its chats; instance %d leads (runs the scheduler)",
                        self.registry.name,
                        holder.instance_id,
                    )
                else:
                    log.info(
                        "instance %s is a standby: instance %d leads", self.registry.name, holder.instance_id
                    )
            await asyncio.sleep(next(delays))

    def fence(self, conn: Connection) -> None:
        """The check at the start of each write transaction (see the module docstring); raises
        :class:`LeadLost` after ``on_lost`` when the lead is no longer this instance's."""
        if self.epoch is None or self._leases is None:
            return  # not leading yet: only the lead's own bookkeeping writes (nothing of a session's)
        if not self._leases.holds(conn, LeaseKind.LEAD, LEAD_KEY, self.epoch):
            self.lose("another instance took the lead (a write was refused)")
            raise LeadLost(f"instance {self.registry.name} no longer leads")

    def lose(self, reason: str) -> None:
        """Something this instance held was taken: ``on_lost`` once (the process leaves)."""
        if not self._lost:
            self._lost = True
            self.on_lost(f"instance {self.registry.name}: {reason}")

    async def _beat(self) -> None:
        """The heartbeat (:meth:`InstanceRegistry.run_heartbeat`, every ``cluster.heartbeat``
        seconds); a lapse while leading is checked against the lease."""
        with contextlib.suppress(LeadLost):  # the heartbeat's own write met the fence: on_lost ran
            await self.registry.run_heartbeat(self.settings.heartbeat, on_lapse=self._still_holds)

    async def _still_leads(self) -> bool:
        """After a lapse (paused past the ttl): whether the lead is still this instance's at its
        epoch; a lead taken meanwhile is lost."""
        if self.epoch is None or self._leases is None:
            return True  # a standby has nothing to lose
        holder = await self._leases.holder(LeaseKind.LEAD, LEAD_KEY)
        if holder is None or holder.instance_id != self.registry.id or holder.epoch != self.epoch:
            self.lose("its heartbeat lapsed and another instance took the lead")
            return False
        return True

    async def _still_holds(self) -> bool:
        """After a lapse: the lead and everything else this instance holds (:attr:`lapse_checks`)."""
        if not await self._still_leads():
            return False
        for check in self.lapse_checks:
            if not await check():
                return False
        return True

    async def release(self) -> None:
        """A graceful stop: no more heartbeats, the instance marked stopped and the lead released
        at once (a standby takes it at its next try, not after the ttl)."""
        if self._beating is not None:
            await cancel_and_wait(self._beating)
        if self._leases is not None and not self._lost:
            await self.registry.stop()
            self.epoch = None


__all__ = ["EXIT_LEAD_LOST", "LEAD_KEY", "Lead", "LeadLost", "exit_now"]
