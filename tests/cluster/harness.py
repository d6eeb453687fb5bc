"""Several agentgram processes on one real PostgreSQL database, beside one fake Telegram and one
fake model endpoint: the crash harness's bot process (:class:`tests.crash.harness.CrashRig`), once
per instance, each with its own config (``cluster.instance_name``) and log, sharing the database
and the workdir (as a cluster's instances share them: docs/operations/cluster.md).

In webhook mode the instances may sit behind a :class:`RoundRobinProxy` (``proxy=True``): one
public URL, each POST handed to the next instance in turn, as a load balancer that knows nothing
of agentgram does; the instances share the chats, and each relays an update of a chat another
instance runs to that instance.

The lease times are short (:data:`LEASE_TTL`, :data:`HEARTBEAT`) so that a takeover is seconds,
not the default ten.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import aiohttp
from aiohttp import web

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
    """Where Telegram POSTs to this instance in webhook mode (``None``: it polls); behind the
    proxy, the proxy's URL (the same for every instance)."""
    listen_url: str | None = None
    """This instance's own listener (webhook mode), bypassing any proxy."""

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def leads(self) -> bool:
        return f"instance {self.name} leads" in self.log_text()

    async def start_standby(self) -> None:
        """Start it while another instance leads: it registers and waits."""
        await self.start(
            lambda: f"instance {self.name} is a standby" in self.log_text(), f"{self.name} a standby"
        )

    async def start_member(self) -> None:
        """Start it in webhook mode beside others (every instance runs its chats): until it serves."""
        polls = self.log_text().count("agentgram is running")
        await self.start(
            lambda: self.log_text().count("agentgram is running") > polls, f"{self.name} running"
        )

    def runs(self, chat_id: int) -> bool:
        """This instance holds the chat's lease (webhook mode: it runs the chat)."""
        rows = self.query(
            "SELECT i.name AS name FROM leases l JOIN instances i ON i.id = l.instance_id "
            "WHERE l.kind = 'chat' AND l.key = ?",
            chat_id,
        )
        return bool(rows) and rows[0]["name"] == self.name

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
        hooks = len(self.tg.calls("setWebhook"))
        await self.wait(self.leads, f"{self.name} to lead", timeout)
        if self.webhook_url is None:
            await self.wait(lambda: len(self.tg.calls("getUpdates")) > polls, f"{self.name} to poll", timeout)
        else:
            await self.wait(
                lambda: self.tg.webhook_url == self.webhook_url and len(self.tg.calls("setWebhook")) > hooks,
                f"{self.name}'s webhook",
                timeout,
            )
        return time.monotonic() - started


@dataclass
class Forwarded:
    """One POST the proxy handed on: to which instance, and its answer (502: nobody answered)."""

    upstream: int
    path: str
    status: int
    chat: int | None = None
    """The chat of the update POSTed (``None``: none, or not an update)."""


@dataclass
class RoundRobinProxy:
    """A load balancer in front of the instances' listeners: each request goes to the next
    upstream in turn; one that refuses the connection is skipped for the next (nginx's default
    ``proxy_next_upstream error``); when none answers, 502. :meth:`route` sends the next requests
    to chosen upstreams."""

    upstreams: list[str] = field(default_factory=list)
    forwarded: list[Forwarded] = field(default_factory=list)
    url: str = ""
    _plan: list[int] = field(default_factory=list)
    _turns: itertools.count[int] = field(default_factory=itertools.count)
    _runner: web.AppRunner | None = None
    _http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def route(self, *upstreams: int) -> None:
        """Send the next requests to ``upstreams``, one each, in order; then round robin again."""
        self._plan.extend(upstreams)

    def statuses(self, upstream: int) -> list[int]:
        return [f.status for f in self.forwarded if f.upstream == upstream]

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._http is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        first = self._plan.pop(0) if self._plan else next(self._turns) % len(self.upstreams)
        for step in range(len(self.upstreams)):
            upstream = (first + step) % len(self.upstreams)
            try:
                async with self._http.request(
                    request.method, self.upstreams[upstream] + request.path_qs, data=body, headers=headers
                ) as answer:
                    content = await answer.read()
                    self.forwarded.append(Forwarded(upstream, request.path, answer.status, _chat_of(body)))
                    kept = {
                        k: v
                        for k, v in answer.headers.items()
                        if k.lower() in ("retry-after", "content-type")
                    }
                    return web.Response(status=answer.status, body=content, headers=kept)
            except aiohttp.ClientConnectorError:
                continue  # that instance is down: the next one
        self.forwarded.append(Forwarded(-1, request.path, 502))
        return web.Response(status=502)


@dataclass
class Cluster:
    tg: HookedTelegram
    llm: FakeOpenAI
    database_url: str
    instances: list[Instance]
    proxy: RoundRobinProxy | None = None

    def owner_of(self, chat_id: int) -> Instance | None:
        """The instance whose lease the chat is under (live or not); ``None`` when none."""
        return next((i for i in self.instances if i.runs(chat_id)), None)

    def conflicts_seen(self) -> list[str]:
        """The instances that were told 409 Conflict by ``getUpdates`` (a second poller) and lived
        to log it (a killed or stopped poller's last long poll is ended by the next poller's
        first, as Telegram does; nobody alive sees that answer)."""
        return [i.name for i in self.instances if "409 Conflict" in i.log_text()]


@asynccontextmanager
async def cluster(
    tmp_path: Path,
    count: int = 2,
    *,
    webhook: bool = False,
    proxy: bool = False,
    **sections: dict[str, Any],
) -> AsyncIterator[Cluster]:
    """``count`` instances configured on a fresh PostgreSQL database (none started); ``webhook``:
    in webhook mode, each on a listener of its own; with ``proxy`` behind one
    :class:`RoundRobinProxy` whose URL they all give ``setWebhook`` (as in production), else each
    sets its own (the leader's ``setWebhook`` points Telegram at it). On failure every instance's
    log is printed; on exit a still-running instance is killed."""
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(HookedTelegram())
        llm = await stack.enter_async_context(FakeOpenAI(models=("main-model", "backup-model")))
        url = await stack.enter_async_context(pg_database())
        front = await stack.enter_async_context(RoundRobinProxy()) if proxy else None
        workdir = tmp_path / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        instances = []
        for n in range(count):
            name = f"node-{chr(ord('a') + n)}"
            config = tmp_path / f"{name}.yml"
            telegram, hook_url = (
                _webhook(sections.get("telegram", {}), front.url if front else None)
                if webhook or proxy
                else (sections.get("telegram"), None)
            )
            listen_url = hook_url
            if front is not None and hook_url is not None:
                front.upstreams.append(hook_url.removesuffix(WEBHOOK_PATH))
                hook_url = front.url + WEBHOOK_PATH
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
                    listen_url=listen_url,
                )
            )
        rig = Cluster(tg, llm, url, instances, front)
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


def _chat_of(body: bytes) -> int | None:
    """The chat of an update's body, as the proxy saw it (for the tests' bookkeeping)."""
    try:
        update = json.loads(body)
        message = update.get("message") or (update.get("callback_query") or {}).get("message") or {}
        return int(message["chat"]["id"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (for a listener started later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


WEBHOOK_SECRET = "cluster-secret_" + "x" * 24
WEBHOOK_PATH = "/telegram/webhook"


def _webhook(telegram: dict[str, Any], public_url: str | None) -> tuple[dict[str, Any], str]:
    """The ``telegram`` section of an instance in webhook mode on a free port (Telegram POSTs to
    ``public_url``, by default the listener itself), and the listener's URL."""
    port = free_port()
    hook = {
        "listen": f"127.0.0.1:{port}",
        "public_url": public_url or f"http://127.0.0.1:{port}",
        "secret_token": WEBHOOK_SECRET,
    }
    return {**telegram, "mode": "webhook", "webhook": hook}, f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
