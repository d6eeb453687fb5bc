"""Mail between sessions (issue 29), end to end: the rules of :mod:`runtime.core.peers` as the
real bot (either driver) keeps them against the fake Bot API and the fake OpenAI server.

Each agent runs its own model (``agents/<name>/AGENT.md`` says ``model: <name>``), so the fake
tells the sessions' requests apart: a parent and its child exchanging mail both ways, each side
reading the other's messages once and in order; the hop count refusing a reply past
``agent.max_mail_hops`` and ending a ping-pong; ``mail_scope`` and ``interrupt_scope`` refusals;
and ``wake_on`` keeping mail that does not wake a session until mail that does arrives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from agentgram.runtime.core.peers import ListScope, PeerStatus, Refused
from agentgram.runtime.core.turn.inject import wakes
from agentgram.runtime.door.values import SessionRef
from agentgram.runtime.infra.storage.models import ChatSession, MailKind, MailRow, Turn, TurnStatus
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Call, Reply, Text, ToolCalls
from tests.fakes.openai_server import Handler as AnyHandler

GROUP = -1001234567890
SENDS = ("spawn_session", "send_message")
SETTLED = {TurnStatus.FINAL}
Handler = Callable[[dict[str, Any]], Reply]
"""How a session's model answers a request (by what the request says)."""


def define(tmp_path: Path, name: str, *settings: str) -> None:
    """``agents/<name>/AGENT.md``, running the model configured as ``name`` (:func:`models`)."""
    folder = tmp_path / "workspace" / "agents" / name
    folder.mkdir(parents=True)
    front = "\n".join(("description: a helper", f"model: {name}", *settings))
    (folder / "AGENT.md").write_text(f"---\n{front}\n---\nYou are {name}.\n")


def models(*names: str) -> dict[str, Any]:
    """The ``llm`` section: each agent's model is ``<name>-model`` at the fake."""
    return {"models": [{"name": name, "model": f"{name}-model"} for name in names]}


def requests(rig: Rig, model: str) -> list[dict[str, Any]]:
    return [body for body in rig.llm.requests if body["model"] == model]


def calling(name: str, arguments: dict[str, Any]) -> ToolCalls:
    """A reply that calls one tool."""
    return ToolCalls([Call(name, arguments)])


def said(body: dict[str, Any]) -> str:
    """Everything the request's user messages say (the session's mail among them), in order."""
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def sent(body: dict[str, Any]) -> int:
    """How many spawns and messages the session sent in the conversation so far."""
    return sum(
        call["function"]["name"] in SENDS
        for m in body["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    )


def results(body: dict[str, Any]) -> dict[str, str]:
    """The request's tool results by call id."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def assert_read_once_in_order(body: dict[str, Any], texts: list[str]) -> None:
    text = said(body)
    assert [text.count(t) for t in texts] == [1] * len(texts), text
    places = [text.index(t) for t in texts]
    assert places == sorted(places), f"read out of order: {texts} at {places}"


async def agent_mail(rig: Rig, session_id: int) -> list[MailRow]:
    """The mail other sessions sent ``session_id``, in its order."""

    def read(tx: Session) -> list[MailRow]:
        query = (
            select(MailRow)
            .where(col(MailRow.session_id) == session_id, col(MailRow.kind) == MailKind.AGENT_MESSAGE)
            .order_by(col(MailRow.seq))
        )
        return list(tx.exec(query).all())

    return await rig.bot.runtime.parts.db.read_sync(read)


async def turn_statuses(rig: Rig) -> set[TurnStatus]:
    """The statuses of every session's turns."""

    def read(tx: Session) -> set[TurnStatus]:
        return set(tx.exec(select(col(Turn.status))).all())

    return await rig.bot.runtime.parts.db.read_sync(read)


async def turns(rig: Rig) -> list[Turn]:
    def read(tx: Session) -> list[Turn]:
        return list(tx.exec(select(Turn).order_by(col(Turn.id))).all())

    return await rig.bot.runtime.parts.db.read_sync(read)


async def session_row(rig: Rig, session_id: int) -> ChatSession:
    return await rig.bot.runtime.parts.peers.session(session_id)


async def all_idle(rig: Rig, root: int) -> bool:
    """Every session of the tree under ``root`` idle, with no unread mail that would wake it."""
    try:
        infos = await rig.bot.runtime.parts.peers.listed(root, ListScope.TREE)
    except Refused:  # the chat's first message is not stored yet
        return False
    deps = rig.bot.runtime.parts.deps
    for info in infos:
        waking = [e for e in await deps.mailbox.unread(info.id) if wakes(e, deps.agents.wake_on(info.agent))]
        if info.status is not PeerStatus.IDLE or waking:
            return False
    return bool(infos)


async def wait_idle(rig: Rig, root: int, timeout: float = 10.0) -> None:
    """Until every session of the tree under ``root`` is idle with nothing to wake it (:func:`all_idle`);
    then what they said is delivered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await all_idle(rig, root):
        if loop.time() > deadline:
            infos = await rig.bot.runtime.parts.peers.listed(root, ListScope.TREE)
            raise AssertionError(f"not all idle: {[(i.id, str(i.status)) for i in infos]}")
        await asyncio.sleep(0.05)
    await rig.bot.delivery.idle()


def replying(rig: Rig, parent: AnyHandler, child: AnyHandler) -> None:
    """Answer the chat's session with ``parent`` and the helper's with ``child``."""

    def answer(body: dict[str, Any]) -> Reply | Awaitable[Reply]:
        return child(body) if body["model"] == "helper-model" else parent(body)

    rig.llm.handler = answer


def exchange(to_child: list[str], to_parent: list[str]) -> tuple[Handler, Handler]:
    """The parent's and the helper's replies for an exchange of messages: the parent spawns the
    helper with ``to_child[0]`` and sends the next whenever one is answered, ending with "All N
    answered."; the helper answers each of its parent's messages with the next of ``to_parent``."""

    def parent(body: dict[str, Any]) -> Reply:
        seen, done = sum(t in said(body) for t in to_parent), sent(body)
        if seen == len(to_parent):
            return Text(f"All {seen} answered.")
        if done > seen:  # the last one is not answered yet
            return Text(f"Waiting for reply {done}.")
        if done == 0:
            return calling("spawn_session", {"agent": "helper", "task": to_child[0]})
        return calling("send_message", {"session": "2", "text": to_child[done]})

    def child(body: dict[str, Any]) -> Reply:
        seen, done = sum(t in said(body) for t in to_child), sent(body)
        if seen > done:
            return calling("send_message", {"session": "parent", "text": to_parent[done]})
        return Text(f"Answered {done}.")

    return parent, child


async def test_three_messages_each_way_are_read_once_and_in_order(tmp_path: Path) -> None:
    define(tmp_path, "helper")
    to_child = ["to-child-1", "to-child-2", "to-child-3"]
    to_parent = ["to-parent-1", "to-parent-2", "to-parent-3"]
    parent, child = exchange(to_child, to_parent)

    async with running_bot(tmp_path, llm=models("helper")) as rig:
        replying(rig, parent, child)
        rig.say("talk to a helper three times")
        await rig.wait_text("All 3 answered.", timeout=20)
        await wait_idle(rig, 1)

        assert_read_once_in_order(requests(rig, "main-model")[-1], to_parent)
        assert_read_once_in_order(requests(rig, "helper-model")[-1], to_child)
        to_2, to_1 = await agent_mail(rig, 2), await agent_mail(rig, 1)
        assert [m.body["text"].endswith(t) for m, t in zip(to_2, to_child, strict=True)] == [True] * 3
        assert [m.body["text"] for m in to_1] == to_parent
        # each reply is one hop deeper than the mail it answers: 1 (the task), 2, 3, …
        assert [m.hops for m in to_2] == [1, 3, 5] and [m.hops for m in to_1] == [2, 4, 6]
        assert {m.body["relation"] for m in to_2} == {"parent"}  # the sender spawned the recipient
        assert {m.body["relation"] for m in to_1} == {"child"}
        assert [m.body["task"] for m in to_2] == [True, False, False]


def last_is_tool(body: dict[str, Any]) -> bool:
    """Whether the conversation ends with a tool's result (the runtime's own system note on the
    date and time comes after it)."""
    roles = [str(m["role"]) for m in body["messages"] if m["role"] != "system"]
    return roles[-1] == "tool"


def ping(body: dict[str, Any]) -> Reply:
    """The chat's session: spawn the helper, then answer each of its mails with one of its own."""
    if last_is_tool(body):
        return Text("Parent waits.")
    if sent(body) == 0:
        return calling("spawn_session", {"agent": "helper", "task": "ping 0"})
    return calling("send_message", {"session": "2", "text": f"ping {sent(body)}"})


def pong(body: dict[str, Any]) -> Reply:
    """The helper: answer each mail with one of its own."""
    if last_is_tool(body):
        return Text("Helper waits.")
    return calling("send_message", {"session": "parent", "text": f"pong {sent(body)}"})


async def test_mail_reaches_a_working_turn_at_its_next_step(tmp_path: Path) -> None:
    """Mail that arrives while the recipient works is read at its turn's next round, not kept for
    another turn (``interrupt`` or not: it marks the mail, and ``interrupt_scope`` limits who may)."""
    define(tmp_path, "helper")
    reported = asyncio.Event()  # the helper's report is stored (its send's result is back)
    async with running_bot(tmp_path, llm=models("helper")) as rig:

        async def parent(body: dict[str, Any]) -> Reply:
            if sent(body) == 0:
                return calling("spawn_session", {"agent": "helper", "task": "report at once"})
            if "progress report" in said(body):
                return Text("Read the report mid-turn.")
            await reported.wait()  # the turn goes on only once the report is stored
            return calling("list_sessions", {})

        def child(body: dict[str, Any]) -> Reply:
            if last_is_tool(body):
                reported.set()
                return Text("Reported.")
            return calling("send_message", {"session": "parent", "text": "progress report"})

        replying(rig, parent, child)
        rig.say("spawn and keep working")
        await rig.wait_text("Read the report mid-turn.", timeout=10)
        await wait_idle(rig, 1)
        assert len([b for b in requests(rig, "main-model") if "progress report" in said(b)]) == 1
        assert [t.session_id for t in await turns(rig)].count(1) == 1  # one turn read it


async def test_a_reply_past_max_mail_hops_is_refused_and_a_users_message_starts_again(tmp_path: Path) -> None:
    define(tmp_path, "helper")
    async with running_bot(tmp_path, llm=models("helper"), agent={"max_mail_hops": 3}) as rig:
        replying(rig, ping, pong)
        rig.say("play ping-pong")
        # hops: the task 1, pong 0 → 2, ping 1 → 3; pong 1 would be the 4th
        await rig.wait_text("Helper waits.", timeout=15)
        await wait_idle(rig, 1)
        refusal = results(requests(rig, "helper-model")[-1])
        assert len(refusal) == 2
        last = list(refusal.values())[-1]
        assert "too many hops" in last and "agent.max_mail_hops (3)" in last, last
        assert [m.hops for m in await agent_mail(rig, 2)] == [1, 3]
        assert [m.hops for m in await agent_mail(rig, 1)] == [2]

        rig.say("once more")  # a user's message counts 0: the chain starts again
        await rig.llm.wait_for_requests(len(rig.llm.requests) + 1)
        await wait_idle(rig, 1)
        assert [m.hops for m in await agent_mail(rig, 2)] == [1, 3, 1, 3]
        assert [m.hops for m in await agent_mail(rig, 1)] == [2, 2]


async def test_a_spawn_past_max_mail_hops_is_refused_and_leaves_no_session(tmp_path: Path) -> None:
    """A task is mail too: the helper's own spawn would be hop 2, over a limit of 1."""
    define(tmp_path, "helper")
    async with running_bot(tmp_path, llm=models("helper"), agent={"max_mail_hops": 1}) as rig:
        rig.llm.script(calling("spawn_session", {"agent": "helper", "task": "go deeper"}), Text("Spawned."))
        deeper = Call("spawn_session", {"agent": "helper", "task": "deeper still"}, id="deeper")
        rig.llm.on_model("helper-model", ToolCalls([deeper]), Text("Could not go deeper."))
        rig.say("spawn a helper")
        await rig.wait_text("Could not go deeper.", timeout=10)
        await wait_idle(rig, 1)
        refusal = results(requests(rig, "helper-model")[-1])["deeper"]
        assert "too many hops" in refusal and "agent.max_mail_hops (1)" in refusal, refusal
        assert [i.id for i in await rig.bot.runtime.parts.peers.listed(1, ListScope.TREE)] == [2, 1]


async def test_two_agents_that_keep_replying_are_stopped_by_the_hop_count(tmp_path: Path) -> None:
    define(tmp_path, "helper")
    limit = 7
    async with running_bot(tmp_path, llm=models("helper"), agent={"max_mail_hops": limit}) as rig:
        replying(rig, ping, pong)
        rig.say("ping-pong forever")
        await wait_idle(rig, 1, timeout=30)
        mail = sorted([*await agent_mail(rig, 1), *await agent_mail(rig, 2)], key=lambda m: m.hops)
        assert [m.hops for m in mail] == list(range(1, limit + 1))  # one chain, cut at the limit
        refused = [
            text for body in rig.llm.requests for text in results(body).values() if "too many hops" in text
        ]
        assert len(refused) == 1  # the 8th mail, the helper's (odd hops are the parent's)
        assert refused[0] in results(requests(rig, "helper-model")[-1]).values()
        assert await turn_statuses(rig) == SETTLED  # every turn of both ended with an answer


def send(call_id: str, to: str, text: str, *, interrupt: bool = False) -> Call:
    return Call("send_message", {"session": to, "text": text, "interrupt": interrupt}, id=call_id)


async def test_family_scope_reaches_siblings_but_not_a_siblings_child(tmp_path: Path) -> None:
    """``mail_scope: family``: A and B, children of the chat's session, write to each other; B may
    not write to C, A's child (the chat's session, ``tree``, may). A sibling is no child: B may
    not interrupt A. Mail from a peer does not wake A (default ``wake_on``): it waits."""
    define(tmp_path, "sib-a", "mail_scope: family")
    define(tmp_path, "sib-b", "mail_scope: family")
    define(tmp_path, "outsider")
    async with running_bot(tmp_path, llm=models("sib-a", "sib-b", "outsider")) as rig:
        rig.llm.script(calling("spawn_session", {"agent": "sib-a", "task": "make a child"}), Text("A is up."))
        rig.llm.on_model(
            "sib-a-model",
            calling("spawn_session", {"agent": "outsider", "task": "wait"}),
            Text("A made C."),
        )
        rig.llm.on_model("outsider-model", Text("C waits."))
        rig.say("start A")
        await rig.wait_text("C waits.", timeout=10)
        await wait_idle(rig, 1)  # 1 the chat's session, 2 A, 3 C (A's child)

        rig.llm.script(calling("spawn_session", {"agent": "sib-b", "task": "write around"}), Text("B is up."))
        rig.llm.on_model(
            "sib-b-model",
            ToolCalls(
                [
                    send("sibling", "2", "hello sibling"),
                    send("nephew", "3", "hello nephew"),
                    send("interrupt", "2", "stop that", interrupt=True),
                ]
            ),
            Text("B is done."),
        )
        rig.say("start B")
        await rig.wait_text("B is done.", timeout=10)
        await wait_idle(rig, 1)  # 4 B

        got = results(requests(rig, "sib-b-model")[-1])
        assert json.loads(got["sibling"])["id"].startswith("mail:4:")
        assert "not permitted" in got["nephew"] and "'family'" in got["nephew"], got["nephew"]
        assert "not permitted to interrupt session 2" in got["interrupt"], got["interrupt"]
        to_a = await agent_mail(rig, 2)
        assert [(m.sender_ref, m.body["text"], m.body["relation"]) for m in to_a][-1] == (
            "4",
            "hello sibling",
            "peer",
        )
        assert len(requests(rig, "sib-a-model")) == 2  # a peer's mail does not wake A: it waits
        assert not [m for m in await agent_mail(rig, 3) if m.sender_ref == "4"]

        rig.llm.script(ToolCalls([send("tree", "3", "hello grandchild")]), Text("Sent."))
        rig.say("write to C")
        await rig.wait_text("Sent.", timeout=10)
        got = results(requests(rig, "main-model")[-1])
        assert json.loads(got["tree"])["id"].startswith("mail:1:")  # tree: C is under the chat's session
        assert [m.sender_ref for m in await agent_mail(rig, 3)] == ["2", "1"]


async def test_what_the_chats_own_session_may_not_send(tmp_path: Path) -> None:
    """The chat's session has no parent; it may not interrupt a session that is not its child, nor
    write to an unknown one, nor (``tree``, the default) to another chat's session."""
    define(tmp_path, "helper")
    group = {"groups": {"allowed_chat_ids": [GROUP]}}
    async with running_bot(tmp_path, llm=models("helper"), telegram=group) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.llm.script(Text("Hello, group."))
        rig.tg.send_text(ALLOWED_USER, "hi all", chat_id=GROUP, mention=True)
        await rig.tg.wait_for(lambda: any(m.visible_text == "Hello, group." for m in rig.tg.messages(GROUP)))
        await wait_idle(rig, 1)  # 1 the group's session

        rig.llm.script(
            calling("spawn_session", {"agent": "helper", "task": "make a child"}), Text("Spawned.")
        )
        rig.llm.on_model(
            "helper-model",
            calling("spawn_session", {"agent": "helper", "task": "wait"}),
            Text("Made a child."),
            Text("Waiting."),
        )
        rig.say("spawn a helper")
        await rig.wait_text("Waiting.", timeout=10)
        await wait_idle(rig, 2)  # 2 the private chat's session, 3 its helper, 4 the helper's child

        rig.llm.script(
            ToolCalls(
                [
                    send("parent", "parent", "hello parent"),
                    send("unknown", "99", "hello nobody"),
                    send("name", "bob", "hello bob"),
                    send("grandchild", "4", "wake up", interrupt=True),
                    send("child", "3", "wake up", interrupt=True),
                    send("other-chat", "1", "hello group"),
                ]
            ),
            Text("Tried them all."),
        )
        rig.llm.on_model("helper-model", Text("Interrupted."))
        rig.say("write to everyone")
        await rig.wait_text("Tried them all.", timeout=10)
        got = results(requests(rig, "main-model")[-1])
        assert "this session has no parent" in got["parent"]
        assert "unknown recipient: there is no session 99" in got["unknown"]
        assert "unknown recipient 'bob'" in got["name"]
        assert "not permitted to interrupt session 4" in got["grandchild"]  # not its child
        assert json.loads(got["child"])["id"].startswith("mail:2:")  # its own child: it may
        assert "not permitted" in got["other-chat"] and "'tree'" in got["other-chat"]
        assert not [m for m in await agent_mail(rig, 1)]  # nothing reached the group's session
        interrupting = [m for m in await agent_mail(rig, 3) if m.sender_ref == "2"][-1]
        assert str(interrupting.priority) == "interrupt"


async def test_wake_on_keeps_mail_that_does_not_wake_until_mail_that_does(tmp_path: Path) -> None:
    """``wake_on: [user]``: the task starts the helper (a spawned session always starts on it);
    its parent's next mail waits, unread, until a user's message wakes it: then it reads both."""
    define(tmp_path, "lazy", "wake_on: [user]")
    async with running_bot(tmp_path, llm=models("lazy")) as rig:
        rig.llm.script(calling("spawn_session", {"agent": "lazy", "task": "first task"}), Text("Spawned."))
        rig.llm.on_model("lazy-model", Text("Did the first task."))
        rig.say("spawn a lazy helper")
        await rig.wait_text("Did the first task.", timeout=10)
        await wait_idle(rig, 1)

        rig.llm.script(ToolCalls([send("second", "2", "second from parent")]), Text("Sent the second."))
        rig.say("send it more")
        await rig.wait_text("Sent the second.", timeout=10)
        hub = rig.bot.runtime.parts.hub
        worker = hub.workers.get(2)
        assert worker is None or worker.idle  # it was told of the mail, and looked at it
        mailbox = rig.bot.runtime.parts.deps.mailbox
        waiting = await mailbox.unread(2)
        assert [e.body.text for e in waiting] == ["second from parent"]  # type: ignore[union-attr]
        assert not hub.is_busy(2)
        assert len(requests(rig, "lazy-model")) == 1  # it did not wake

        rig.llm.on_model("lazy-model", Text("Read both."))
        helper = SessionRef.of(await session_row(rig, 2))
        await rig.bot.runtime.chat.accept_user_message(helper, "now from the user", envelope_id="test:nudge")
        await rig.wait_text("Read both.", timeout=10)
        await wait_idle(rig, 1)
        body = requests(rig, "lazy-model")[-1]
        assert_read_once_in_order(body, ["first task", "second from parent", "now from the user"])
