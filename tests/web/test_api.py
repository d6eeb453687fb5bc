"""The web view's JSON API over real HTTP, against a bot whose turns ran through the fakes."""

from __future__ import annotations

import io
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from agentgram.runtime.debug_view import MAX_MAIL, MAX_TREE, DebugView
from agentgram.runtime.infra.log import RedactingFilter, get_logger
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import SessionSource
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicRun, TicRunStatus
from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import wait_prompt
from tests.fakes.openai_server import Hang, Text, ToolCalls
from tests.web.harness import TOKEN, web_view
from tests.web.spawned import mail, spawn

TIC = {"enabled": True, "interval": 1}


def _messages(detail: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [m for m in detail["messages"] if m["kind"] == kind]


async def test_every_path_but_healthz_needs_the_token(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web, web.anonymous() as anonymous:
        for path in (
            "/api/sessions",
            "/",
            "/docs",
            "/openapi.json",
            "/metrics",
            "/jobs",
            "/cluster",
            "/api/cluster",
        ):
            assert (await anonymous.get(path)).status_code == 401, path
            wrong = await anonymous.get(path, headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 401, path
            assert (await web.client.get(path)).status_code == 200, path
        await rig.tg.wait_for(lambda: rig.bot.ingest.last_poll_ok is not None)
        health = await anonymous.get("/healthz")
        assert health.status_code == 200
        assert health.json() == {
            "status": "ok",
            "polling": "ok",
            "llm": "ok",
            "db": "ok",
            "instance": f"{socket.gethostname()}-{os.getpid()}",
            "role": "single",
        }


async def test_a_token_in_the_query_becomes_an_http_only_cookie_and_leaves_the_url(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web, web.anonymous() as browser:
        wrong = await browser.get("/runs", params={"token": "not-the-token"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        traded = await browser.get("/runs", params={"token": TOKEN, "x": "1"})
        assert traded.status_code == 303 and traded.headers["location"] == "/runs?x=1"
        cookie = traded.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie
        assert (await browser.get("/runs")).status_code == 200, "the cookie is enough from now on"
        assert (await browser.get("/api/jobs")).status_code == 200


async def test_sessions_are_listed_newest_first_in_pages_and_by_source(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        for n in range(1, 5):
            rig.say("/new")
            await rig.tg.wait_for(lambda n=n: len(rig.chat()) == n + 1)
        first = (await web.client.get("/api/sessions", params={"per_page": 2})).json()
        assert (first["total"], first["page"], first["per_page"]) == (5, 1, 2)
        assert [item["id"] for item in first["items"]] == [5, 4]
        last = (await web.client.get("/api/sessions", params={"per_page": 2, "page": 3})).json()
        (oldest,) = last["items"]
        assert (oldest["id"], oldest["source"], oldest["message_count"]) == (1, "chat", 2)
        assert oldest["is_interactive"] and not oldest["is_ephemeral"] and oldest["last_message_at"]
        chats = (await web.client.get("/api/sessions", params={"source": "chat"})).json()
        tics = (await web.client.get("/api/sessions", params={"source": "tic"})).json()
        assert (chats["total"], tics["total"], tics["items"]) == (5, 0, [])
        assert (await web.client.get("/api/sessions", params={"source": "nope"})).status_code == 422
        assert (await web.client.get("/api/sessions", params={"per_page": 1000})).status_code == 422


FORUM = -1001234567890


async def test_a_forum_topics_session_shows_its_title_and_topic_escaped_and_masked(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram={"groups": {"allowed_chat_ids": [FORUM]}}) as rig:
        async with web_view(rig) as web:
            rig.tg.add_group(FORUM, title="Team", forum=True)
            topic = rig.tg.add_topic(FORUM, "R&D <ideas> sk-test-secret")
            rig.llm.script(Text("Noted."))
            rig.tg.send_text(ALLOWED_USER, "an idea", chat_id=FORUM, thread_id=topic, mention=True)
            await rig.wait_turns()
            (item,) = (await web.client.get("/api/sessions")).json()["items"]
            assert (item["chat_id"], item["thread_id"]) == (FORUM, topic)
            assert item["title"] == "Team › R&D <ideas> ***", "the title is redacted like other text"
            detail = (await web.client.get(f"/api/sessions/{item['id']}")).json()["session"]
            assert (detail["title"], detail["thread_id"]) == (item["title"], topic)

            shown = "Team › R&amp;D &lt;ideas&gt; ***"
            listing = (await web.client.get("/")).text
            assert shown in listing and f"topic {topic}" in listing and "sk-test-secret" not in listing
            page = (await web.client.get(f"/sessions/{item['id']}")).text
            assert f'<span class="title">{shown}</span>' in page and f"topic {topic}" in page
            assert "<ideas>" not in page, "the title is HTML-escaped"


async def test_a_private_chats_session_has_no_title_and_no_topic(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        (item,) = (await web.client.get("/api/sessions")).json()["items"]
        assert (item["title"], item["thread_id"]) == (None, 0)
        page = (await web.client.get("/sessions/1")).text
        assert 'class="title"' not in page and 'class="topic"' not in page


async def test_a_tool_call_turn_shows_reasoning_arguments_result_and_tokens_with_secrets_masked(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        (rig.workdir / "notes.md").write_text("milk, eggs; the key is sk-test-secret\n")
        rig.llm.script(
            ToolCalls([("read_file", {"path": "notes.md"})], usage=(120, 7)),
            Text("Milk and eggs.", reasoning="The list says milk and eggs.", usage=(150, 9)),
        )
        rig.say("what is on my list?")
        await rig.wait_turns()
        detail = (await web.client.get("/api/sessions/1")).json()
        assert detail["session"]["source"] == "chat" and detail["session"]["agent_id"] == "main"
        assert [m["kind"] for m in detail["messages"]] == ["user", "thinking", "tool", "assistant"]
        (user,) = _messages(detail, "user")
        assert (user["content"], user["is_synthetic"]) == ("what is on my list?", False)
        (call,) = _messages(detail, "tool")
        assert (call["name"], call["arguments"], call["status"]) == (
            "read_file",
            {"path": "notes.md"},
            "done",
        )
        assert "milk, eggs; the key is ***" in call["result"] and "sk-test-secret" not in call["result"]
        (answer,) = _messages(detail, "assistant")
        assert (answer["content"], answer["reasoning"]) == ("Milk and eggs.", "The list says milk and eggs.")
        assert (answer["input_tokens"], answer["output_tokens"]) == (150, 9)
        assert _messages(detail, "thinking")[0]["input_tokens"] == 120
        assert (await web.client.get("/api/sessions/99")).status_code == 404


async def test_a_tic_session_is_listed_as_tic_with_its_synthetic_turn(tmp_path: Path) -> None:
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    (workdir / "TIC.md").write_text("- check whether the nightly backup ran\n")
    async with running_bot(tmp_path, tic=TIC) as rig, web_view(rig) as web:
        ran: list[TicRun] = []
        rig.bot.runtime.parts.scheduler.tic_listeners.append(ran.append)
        rig.llm.handler = lambda body: Text("TIC_OK")
        await rig.tg.wait_for(lambda: any(t.status == TicRunStatus.RAN for t in ran))
        listed = (await web.client.get("/api/sessions", params={"source": "tic"})).json()
        tic = listed["items"][0]
        assert (tic["source"], tic["is_interactive"]) == ("tic", False)
        detail = (await web.client.get(f"/api/sessions/{tic['id']}")).json()
        (user, answer) = detail["messages"][:2]
        assert user["kind"] == "user" and user["is_synthetic"] and user["content"].startswith("[TIC] ")
        assert answer["content"] == "TIC_OK"
        runs = (await web.client.get("/api/runs")).json()
        assert runs["tic"][0]["session_id"] == tic["id"] and runs["tic"][0]["status"] == "ran"
        page = (await web.client.get(f"/sessions/{tic['id']}")).text
        assert 'class="entry user synthetic"' in page and ">synthetic<" in page


async def _running_job(rig: Rig, done: list[JobRun]) -> int:
    rig.bot.runtime.parts.scheduler.run_listeners.append(done.append)
    rig.say("/cron add in 20m call Anna about the tickets")
    await rig.wait_text("Scheduled “")
    rig.llm.script(Hang("Calling…", seconds=30))
    assert await rig.bot.runtime.parts.scheduler.run_now(1)
    await rig.llm.wait_for_requests(1)
    return 1


async def test_kill_cancels_a_running_cron_job_as_cron_kill_does(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        done: list[JobRun] = []
        job_id = await _running_job(rig, done)
        (job,) = (await web.client.get("/api/jobs")).json()
        assert (job["id"], job["running"]) == (job_id, True)
        killed = await web.client.post(f"/api/jobs/{job_id}/kill")
        assert killed.status_code == 202 and killed.json() == {"job_id": job_id, "killed": True}
        await rig.llm.wait_stream_closed()
        await rig.tg.wait_for(lambda: [r.status for r in done] == [JobRunStatus.CANCELLED])
        (run,) = (await web.client.get(f"/api/jobs/{job_id}/runs")).json()
        assert run["status"] == "cancelled" and run["session_id"] is not None
        assert (await web.client.post(f"/api/jobs/{job_id}/kill")).status_code == 409
        assert (await web.client.post("/api/jobs/42/kill")).status_code == 404
        assert (await web.client.get("/api/jobs/42/runs")).status_code == 404


async def test_the_kill_button_posts_the_same_kill_and_comes_back_to_the_jobs(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        done: list[JobRun] = []
        job_id = await _running_job(rig, done)
        page = (await web.client.get("/jobs")).text
        assert f'action="/jobs/{job_id}/kill"' in page and ">Kill</button>" in page
        pressed = await web.client.post(f"/jobs/{job_id}/kill")
        assert pressed.status_code == 303 and pressed.headers["location"] == f"/jobs?killed={job_id}"
        await rig.tg.wait_for(lambda: [r.status for r in done] == [JobRunStatus.CANCELLED])
        again = await web.client.post(f"/jobs/{job_id}/kill")
        assert again.headers["location"] == f"/jobs?failed={job_id}"


async def test_approvals_lists_the_pending_requests(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        rig.llm.script(ToolCalls([("write_file", {"path": "a.txt", "content": "hi"})]), Text("Done."))
        rig.say("write a.txt")
        await wait_prompt(rig)
        (pending,) = (await web.client.get("/api/approvals")).json()
        assert pending["tool"] == "write_file" and pending["arguments"]["path"] == "a.txt"
        assert pending["session_id"] == 1


async def test_healthz_is_503_once_polling_has_been_down_for_a_minute(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        async with web_view(rig, last_poll=lambda: time.monotonic() - 61) as web:
            down = await web.client.get("/healthz")
            assert down.status_code == 503 and down.json()["polling"] == "down"
            assert down.json()["db"] == "ok"
        async with web_view(rig, last_poll=lambda: None) as web:
            starting = await web.client.get("/healthz")
            assert starting.status_code == 200 and starting.json()["polling"] == "starting"


RESEARCHER = """\
---
description: finds facts
tools: [read_file, list_dir]
---
You are the researcher. Answer with the fact only.
"""


TASK_MAIL = (
    "[mail task:1:call1 from session 1]\nYou are session 2, working on a task for session 1 (your "
    "parent): your final answer is its result. It may write to you while you work. Your task:\n"
    "What is the answer?"
)


async def test_a_sub_agents_frame_sits_between_agent_and_agent_end_after_its_call(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "agents" / "researcher"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(RESEARCHER)
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        task = {"agent": "researcher", "task": "What is the answer?"}
        rig.llm.script(ToolCalls([("execute_task", task)]), Text("It is 42."), Text("The answer is 42."))
        rig.say("ask the researcher")
        await rig.wait_turns(2)  # the researcher's, in a session of its own (issue 29), and main's
        detail = (await web.client.get("/api/sessions/1")).json()
        shape = [
            (m["kind"], m.get("agent_id") or m.get("name") or m.get("content")) for m in detail["messages"]
        ]
        assert shape == [
            ("user", "ask the researcher"),
            ("thinking", ""),
            ("tool", "execute_task"),
            ("agent", "researcher"),
            ("user", TASK_MAIL),
            ("assistant", "It is 42."),
            ("agent_end", "researcher"),
            ("assistant", "The answer is 42."),
        ]
        assert [m["depth"] for m in detail["messages"] if m["kind"].startswith("agent")] == [1, 1]
        agents = [m for m in detail["messages"] if m["kind"].startswith("agent")]
        assert [m["session_id"] for m in agents] == [2, 2]  # the session the researcher worked in


async def test_metrics_over_http_count_the_turn_just_answered(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:

        async def finals() -> float:
            page = await web.client.get("/metrics")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
            line = next(
                (x for x in page.text.splitlines() if x.startswith('agentgram_turns_total{outcome="final"}')),
                'agentgram_turns_total{outcome="final"} 0',
            )
            return float(line.rsplit(" ", 1)[1])

        before = await finals()
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        assert await finals() == before + 1


async def test_a_sub_agents_session_is_listed_under_subagent_and_telegram_is_chat(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "agents" / "researcher"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(RESEARCHER)
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        task = {"agent": "researcher", "task": "What is the answer?"}
        rig.llm.script(ToolCalls([("execute_task", task)]), Text("It is 42."), Text("The answer is 42."))
        rig.say("ask the researcher")
        await rig.wait_turns(2)  # the researcher's, in a session of its own (issue 29), and main's
        rig.say("/new")
        await rig.wait_text("Fresh conversation")

        async def listed(source: str) -> list[int]:
            found = await web.client.get("/api/sessions", params={"source": source})
            assert found.status_code == 200, source
            return [item["id"] for item in found.json()["items"]]

        # the chat's root agent ran its sub-agent as a session of its own (issue 29): session 2
        assert await listed("subagent") == [2]
        assert await listed("telegram") == await listed("chat") == [3, 1]
        page = await web.client.get("/", params={"source": "subagent"})
        assert page.status_code == 200 and 'href="/sessions/2"' in page.text
        assert 'href="/sessions/3"' not in page.text  # (1 is there: the researcher's parent)


MCP_TOKEN = "ghp-mcp-env-secret-0123"
MCP_HEADER = "Bearer mcp-header-secret-4567"


async def test_mcp_env_and_header_secrets_are_masked_in_the_web_view_and_the_log(tmp_path: Path) -> None:
    lazy = {"command": "true", "env": {"GITHUB_TOKEN": MCP_TOKEN}}
    remote = {"url": "https://mcp.example.invalid/mcp", "headers": {"Authorization": MCP_HEADER}}
    async with (
        running_bot(tmp_path, mcp={"servers": {"gh": lazy, "remote": remote}}) as rig,
        web_view(rig) as web,
    ):
        (rig.workdir / "env.txt").write_text(f"GITHUB_TOKEN={MCP_TOKEN}\nAuthorization: {MCP_HEADER}\n")
        rig.llm.script(ToolCalls([("read_file", {"path": "env.txt"})]), Text("Read it."))
        rig.say("show env.txt")
        await rig.wait_turns()
        (call,) = _messages((await web.client.get("/api/sessions/1")).json(), "tool")
        assert "GITHUB_TOKEN=***" in call["result"] and "Authorization: ***" in call["result"]
        assert MCP_TOKEN not in call["result"] and "mcp-header-secret-4567" not in call["result"]
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.addFilter(RedactingFilter())
        logger = get_logger("test-mcp-secrets")
        logger.addHandler(handler)
        try:
            logger.warning("the server said %s and %s", MCP_TOKEN, MCP_HEADER)
        finally:
            logger.removeHandler(handler)
        assert stream.getvalue() == "the server said *** and ***\n"


async def test_healthz_is_503_while_the_database_does_not_answer(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        broken = tmp_path / "broken.db"
        broken.write_bytes(b"this is not a database " * 100)
        db = Database(f"sqlite+aiosqlite:///{broken}")
        runtime = rig.bot.runtime
        # the web view reads this one
        runtime.debug = DebugView(db, runtime.parts.scheduler, runtime.parts.llm)
        await rig.tg.wait_for(lambda: rig.bot.ingest.last_poll_ok is not None)
        try:
            async with web_view(rig) as web, web.anonymous() as anonymous:
                down = await anonymous.get("/healthz")
            assert down.status_code == 503
            assert (down.json()["status"], down.json()["db"], down.json()["polling"]) == (
                "down",
                "down",
                "ok",
            )
        finally:
            await db.close()


LONG = "x" * 1000
SECRET_MAIL = "<b>done</b>: the key is sk-test-secret"


async def _family(rig: Rig) -> dict[str, int]:
    """Chat session 1 spawned 2 (“deploy <watcher>”), which spawned 3 (closed since), and 4; mail
    went 1 → 2 (the task), 2 → 3 (long), 3 → 2 (markup and a secret) and 4 → 1; a tic session
    stands apart."""
    rig.llm.script(Text("Hi there!"))
    rig.say("hello")
    await rig.wait_turns()
    store, db = rig.bot.runtime.parts.session_store, rig.bot.runtime.parts.db
    watcher = await spawn(store, 1, "researcher", "deploy <watcher>")
    worker = await spawn(store, watcher, "main", closed=True)
    helper = await spawn(store, 1, "researcher", "sk-test-secret helper")
    tic = await store.create_headless(SessionSource.TIC, None)
    await mail(db, 1, watcher, "Your task: watch the deploy", relation="parent", hops=1)
    await mail(db, watcher, worker, LONG, relation="parent", hops=2, interrupt=True)
    await mail(db, worker, watcher, SECRET_MAIL, relation="child", hops=3)
    await mail(db, helper, 1, "found nothing", relation="child", hops=1)
    assert tic.id is not None
    return {"watcher": watcher, "worker": worker, "helper": helper, "tic": tic.id}


async def test_a_spawned_session_carries_its_tree_and_the_mail_it_sent_or_received(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        ids = await _family(rig)
        watcher = (await web.client.get(f"/api/sessions/{ids['watcher']}")).json()
        session = watcher["session"]
        assert (session["source"], session["name"]) == ("agent", "deploy <watcher>")
        assert (session["parent_session_id"], session["root_session_id"]) == (1, 1)
        assert [(n["id"], n["depth"], n["parent_session_id"], n["status"]) for n in watcher["tree"]] == [
            (1, 0, None, "active"),
            (ids["watcher"], 1, 1, "active"),
            (ids["worker"], 2, ids["watcher"], "closed"),
            (ids["helper"], 1, 1, "active"),
        ], "parents before children, each under its parent; the closed one says so"
        assert [n["name"] for n in watcher["tree"]] == [None, "deploy <watcher>", None, "*** helper"]
        assert not watcher["tree_truncated"] and not watcher["mail_truncated"]
        shape = [
            (m["from_session_id"], m["to_session_id"], m["relation"], m["hops"], m["interrupt"])
            for m in watcher["mail"]
        ]
        assert shape == [
            (1, ids["watcher"], "parent", 1, False),
            (ids["watcher"], ids["worker"], "parent", 2, True),
            (ids["worker"], ids["watcher"], "child", 3, False),
        ], "what it sent and received, oldest first; not the mail between others"
        assert watcher["mail"][1]["text"] == LONG, "the JSON has the whole text"
        assert watcher["mail"][2]["text"] == "<b>done</b>: the key is ***"
        root = (await web.client.get("/api/sessions/1")).json()
        assert root["tree"] == watcher["tree"], "the same tree from any of its sessions"
        assert [m["text"] for m in root["mail"]] == ["Your task: watch the deploy", "found nothing"], (
            "the user's own message to it is not mail between sessions"
        )
        alone = (await web.client.get(f"/api/sessions/{ids['tic']}")).json()
        assert [n["id"] for n in alone["tree"]] == [ids["tic"]] and alone["mail"] == []
        listed = {item["id"]: item for item in (await web.client.get("/api/sessions")).json()["items"]}
        assert (listed[ids["worker"]]["parent_session_id"], listed[ids["worker"]]["root_session_id"]) == (
            ids["watcher"],
            1,
        )
        assert listed[ids["helper"]]["name"] == "*** helper" and listed[1]["parent_session_id"] is None
        spawned = (await web.client.get("/api/sessions", params={"source": "agent"})).json()
        assert [item["id"] for item in spawned["items"]] == [ids["helper"], ids["worker"], ids["watcher"]]


async def test_the_session_page_shows_the_tree_and_the_mail_escaped_masked_and_cut(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        ids = await _family(rig)
        page = (await web.client.get(f"/sessions/{ids['watcher']}")).text
        assert 'id="tree"' in page and 'id="mail"' in page
        for n in (1, ids["watcher"], ids["worker"], ids["helper"]):
            assert f'<a href="/sessions/{n}">#{n}</a>' in page, n
        assert f'class="current" aria-current="page" data-session="{ids["watcher"]}"' in page
        assert page.count('aria-current="page"') == 1, "only this session is marked"
        assert "<b>deploy &lt;watcher&gt;</b>" in page and "<watcher>" not in page
        assert "&lt;b&gt;done&lt;/b&gt;: the key is ***" in page, "mail text is escaped and masked"
        assert "<b>done</b>" not in page and "sk-test-secret" not in page
        assert "x" * 300 + "…" in page and "x" * 301 not in page, "long mail shows its start"
        assert "1000 characters" in page and f'href="/api/sessions/{ids["watcher"]}"' in page
        assert ">interrupt<" in page and "spawned by" in page
        assert "(parent to child)" in page and "(child to parent)" in page
        listing = (await web.client.get("/")).text
        parent = ids["watcher"]
        spawned_by = f'spawned <span class="parent">by <a href="/sessions/{parent}">#{parent}</a>'
        assert spawned_by in listing, "the list names a spawned session's parent"
        assert "“deploy &lt;watcher&gt;”" in listing and "sk-test-secret" not in listing
        lone = (await web.client.get(f"/sessions/{ids['tic']}")).text
        assert 'id="tree"' not in lone and 'id="mail"' not in lone, "a session alone shows neither"


async def test_the_tree_and_the_mail_are_capped_and_say_so(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        rig.llm.script(Text("Hi there!"))
        rig.say("hello")
        await rig.wait_turns()
        store, db = rig.bot.runtime.parts.session_store, rig.bot.runtime.parts.db
        children = [await spawn(store, 1, "researcher") for _ in range(MAX_TREE + 1)]
        for n in range(MAX_MAIL + 5):
            await mail(db, children[0], 1, f"report {n}", relation="child", hops=1)
        last = (await web.client.get(f"/api/sessions/{children[-1]}")).json()
        assert len(last["tree"]) == MAX_TREE + 1 and last["tree_truncated"]
        assert last["tree"][-1]["id"] == children[-1], "past the cap, the session itself is still shown"
        root = (await web.client.get("/api/sessions/1")).json()
        assert len(root["mail"]) == MAX_MAIL and root["mail_truncated"]
        assert [root["mail"][0]["text"], root["mail"][-1]["text"]] == ["report 5", f"report {MAX_MAIL + 4}"]
        page = (await web.client.get("/sessions/1")).text
        assert "Only the newest mail is shown." in page and "Only the tree's oldest sessions" in page
