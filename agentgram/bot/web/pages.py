"""The server-rendered pages: sessions, one session's tree, tic/cron runs, jobs, the cluster.

Plain HTML from Jinja2 templates (``templates/``), one small stylesheet in
the base template, no JavaScript: tool calls fold with ``<details>``, mail
between sessions shows its first :data:`MAIL_CHARS` (the JSON has it whole), and the
Kill button is a form that posts to ``/jobs/{id}/kill`` — the API's own kill —
and redirects back to ``/jobs`` (303) with what happened in the query.
"""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from agentgram.bot.web.api import SourceFilter, kill_job
from agentgram.bot.web.state import WebState
from agentgram.runtime.debug_view import MAX_PER_PAGE, SessionSource

TEMPLATES = Path(__file__).parent / "templates"
FOLD_CHARS = 800
"""Tool results longer than this show their start, the rest one tap away."""
MAIL_CHARS = 300
"""Mail between sessions longer than this shows its start; ``/api/sessions/{id}`` has it whole."""
SOURCES = {
    SessionSource.CHAT: "telegram chat",
    SessionSource.TERMINAL: "terminal",
    SessionSource.TIC: "tic",
    SessionSource.CRON: "cron",
    SessionSource.SUBAGENT: "sub-agent",
    SessionSource.AGENT: "spawned",
}

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=TEMPLATES)


def _when(value: datetime | None, zone: tzinfo) -> str:
    return "" if value is None else value.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def _pretty(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _render(request: Request, name: str, **context: object) -> HTMLResponse:
    zone = WebState.of(request).runtime.timezone
    context.update(
        when=lambda v: _when(v, zone), pretty=_pretty, fold=FOLD_CHARS, mail_chars=MAIL_CHARS, sources=SOURCES
    )
    return templates.TemplateResponse(request, name, context)


@router.get("/", response_class=HTMLResponse)
async def sessions_page(
    request: Request,
    source: SourceFilter | None = None,
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=MAX_PER_PAGE)] = 20,
) -> HTMLResponse:
    found = await WebState.of(request).debug.sessions(source, page, per_page)
    return _render(request, "sessions.html", page=found, source=source)


@router.get("/sessions/{session_id}", response_class=HTMLResponse)
async def session_page(request: Request, session_id: int) -> HTMLResponse:
    detail = await WebState.of(request).debug.session(session_id)
    if detail is None:
        raise HTTPException(404, f"no session {session_id}")
    return _render(request, "session.html", detail=detail)


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(request: Request) -> HTMLResponse:
    debug = WebState.of(request).debug
    return _render(request, "runs.html", tics=await debug.tic_runs(), crons=await debug.job_runs())


@router.get("/jobs", response_class=HTMLResponse)
async def jobs_page(request: Request, killed: int | None = None, failed: int | None = None) -> HTMLResponse:
    jobs = await WebState.of(request).debug.jobs()
    return _render(request, "jobs.html", jobs=jobs, killed=killed, failed=failed)


@router.get("/cluster", response_class=HTMLResponse)
async def cluster_page(request: Request) -> HTMLResponse:
    return _render(request, "cluster.html", cluster=await WebState.of(request).debug.cluster())


@router.post("/jobs/{job_id}/kill")
async def kill_page(request: Request, job_id: int) -> RedirectResponse:
    try:
        await kill_job(WebState.of(request), job_id)
    except HTTPException:
        return RedirectResponse(f"/jobs?failed={job_id}", status_code=303)
    return RedirectResponse(f"/jobs?killed={job_id}", status_code=303)
