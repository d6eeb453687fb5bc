"""Several agentgram processes on one real PostgreSQL database, beside one fake Telegram and one
fake model endpoint: the crash harness's bot process (:class:`tests.crash.harness.CrashRig`), once
per instance, each with its own config (``cluster.instance_name``) and log, sharing the database
and the workdir (as a cluster's instances share them: docs/operations/cluster.md).

The lease times are short (:data:`LEASE_TTL`, :data:`HEARTBEAT`) so that a takeover is seconds,
not the default ten.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.backends import pg_database
from tests.crash.harness import CrashRig, HookedTelegram, write_config
from tests.fakes.openai_server import FakeOpenAI

LEASE_TTL = 3.0
HEARTBEAT = 0.5
TAKEOVER = LEASE_TTL + LEASE_TTL / 3 + 5.0
"""The most a takeover may take: the ttl, one scan, and a cold process's recovery on a busy machine."""


@dataclass
class Instance(CrashRig):
    """One instance's process (a :class:`CrashRig` whose log and config are its own)."""

    name: str = ""
    webhook_url: str | None = None
    """Where Telegram POSTs to this instance in webhook mode (``None``: it polls)."""

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def leads(self) -> bool:
        return f"instance {self.name} leads" in self.log_text()

    async def start_standby(self) -> None:
        """Start it while another instance leads: it registers and waits."""
        await self.start(
            lambda: f"instance {self.name} is a standby" in self.log_text(), f"{self.name} a standby"
        )

    async def start_leading(self) -> None:
        """Start it as the first instance: it leads at once (polls, or set its webhook)."""
        if self.webhook_url is None:
            await self.start()
        else:
            await self.start(lambda: self.tg.webhook_url == self.webhook_url, f"{self.name}'s webhook set")

    async def wait_lead(self, timeout: float = TAKEOVER) -> float:
        """Wait until it leads and polls (or set its webhook); how long that took."""
        started = time.monotonic()
        polls = len(self.tg.calls("getUpdates"))
        await self.wait(self.leads, f"{self.name} to lead", timeout)
        if self.webhook_url is None:
            await self.wait(lambda: len(self.tg.calls("getUpdates")) > polls, f"{self.name} to poll", timeout)
        else:
            await self.wait(
                lambda: self.tg.webhook_url == self.webhook_url, f"{self.name}'s webhook", timeout
            )
        return time.monotonic() - started


@dataclass
class Cluster:
    tg: HookedTelegram
    llm: FakeOpenAI
    database_url: str
    instances: list[Instance]

    def conflicts_seen(self) -> list[str]:
        """The instances that were told 409 Conflict by ``getUpdates`` (a second poller) and lived
        to log it (a killed or stopped poller's last long poll is ended by the next poller's
        first, as Telegram does; nobody alive sees that answer)."""
        return [i.name for i in self.instances if "409 Conflict" in i.log_text()]


@asynccontextmanager
async def cluster(
    tmp_path: Path, count: int = 2, *, webhook: bool = False, **sections: dict[str, Any]
) -> AsyncIterator[Cluster]:
    """``count`` instances configured on a fresh PostgreSQL database (none started); ``webhook``:
    in webhook mode, each on a listener of its own (in production they share one public URL
    behind a proxy; here the leader's ``setWebhook`` points Telegram at it). On failure every
    instance's log is printed; on exit a still-running instance is killed."""
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(HookedTelegram())
        llm = await stack.enter_async_context(FakeOpenAI(models=("main-model", "backup-model")))
        url = await stack.enter_async_context(pg_database())
        workdir = tmp_path / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        instances = []
        for n in range(count):
            name = f"node-{chr(ord('a') + n)}"
            config = tmp_path / f"{name}.yml"
            telegram, hook_url = (
                _webhook(sections.get("telegram", {})) if webhook else (sections.get("telegram"), None)
            )
            write_config(
                config,
                tg_root=tg.root,
                llm_url=llm.base_url,
                tmp_path=tmp_path,
                storage={"url": url},
                cluster={
                    "enabled": True,
                    "lease_ttl": LEASE_TTL,
                    "heartbeat": HEARTBEAT,
                    "instance_name": name,
                },
                **{key: value for key, value in sections.items() if key != "telegram"},
                **({"telegram": telegram} if telegram else {}),
            )
            instances.append(
                Instance(
                    tmp_path=tmp_path,
                    tg=tg,
                    llm=llm,
                    config_path=config,
                    log_path=tmp_path / f"{name}.log",
                    database_url=url,
                    workdir=workdir,
                    name=name,
                    webhook_url=hook_url,
                )
            )
        rig = Cluster(tg, llm, url, instances)
        try:
            yield rig
        except BaseException:
            for instance in instances:
                print(f"----- {instance.name} log -----\n{instance.log_text()[-20000:]}")
            print(f"----- LLM requests: {len(llm.requests)} -----")
            for body in llm.requests:
                print(json.dumps(body.get("messages", body), ensure_ascii=False)[:1500])
            raise
        finally:
            for instance in instances:
                if instance.running:
                    instance.kill_now()
                    await instance.reap_killed()
                instance.database.close()


WEBHOOK_SECRET = "cluster-secret_" + "x" * 24
WEBHOOK_PATH = "/telegram/webhook"


def _webhook(telegram: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The ``telegram`` section of an instance in webhook mode on a free port, and its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    hook = {
        "listen": f"127.0.0.1:{port}",
        "public_url": f"http://127.0.0.1:{port}",
        "secret_token": WEBHOOK_SECRET,
    }
    return {**telegram, "mode": "webhook", "webhook": hook}, f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
