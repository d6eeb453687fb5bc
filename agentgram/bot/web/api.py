"""The JSON API: the shapes of docs/architecture/debug-view.md, as :mod:`runtime.debug_view` builds them.

The response models are the debug view's own frozen values, so ``/docs``
shows exactly what a handler returns. ``POST /api/jobs/{id}/kill`` answers
202 once the cancellation is under way (``Runtime.kill_job``, the path
``/cron kill`` takes), 404 for no such job and 409 when it is not running.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, BeforeValidator

from agentgram.bot.web.state import WebState
from agentgram.runtime.debug_view import (
    MAX_PER_PAGE,
    ApprovalInfo,
    ClusterInfo,
    JobInfo,
    JobRunInfo,
    SessionDetail,
    SessionPage,
    SessionSource,
    TicRunInfo,
)


def _source_alias(value: object) -> object:
    return SessionSource.CHAT if value == "telegram" else value


SourceFilter = Annotated[SessionSource, BeforeValidator(_source_alias)]
"""A session source as a query names it (the API and the pages): ``telegram``, the name the config's
rules accept too (docs/architecture/debug-view.md), reads as ``chat``. The runtime names no chat platform."""

router = APIRouter(prefix="/api", tags=["api"])


class Killed(BaseModel):
    job_id: int
    killed: bool


class Runs(BaseModel):
    tic: list[TicRunInfo]
    cron: list[JobRunInfo]


@router.get("/sessions")
async def sessions(
    request: Request,
    source: SourceFilter | None = None,
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=MAX_PER_PAGE)] = 20,
) -> SessionPage:
    """Newest first, optionally only one source's."""
    return await WebState.of(request).debug.sessions(source, page, per_page)


@router.get("/sessions/{session_id}")
async def session(request: Request, session_id: int) -> SessionDetail:
    """The session's whole tree: synthetic turns, reasoning, tool calls, sub-agent frames; the
    spawn tree it is in (``tree``) and the mail between sessions it sent or received (``mail``)."""
    detail = await WebState.of(request).debug.session(session_id)
    if detail is None:
        raise HTTPException(404, f"no session {session_id}")
    return detail


@router.get("/jobs")
async def jobs(request: Request) -> list[JobInfo]:
    return await WebState.of(request).debug.jobs()


@router.get("/jobs/{job_id}/runs")
async def job_runs(request: Request, job_id: int) -> list[JobRunInfo]:
    """Newest first."""
    debug = WebState.of(request).debug
    if await debug.job(job_id) is None:
        raise HTTPException(404, f"no job {job_id}")
    return await debug.job_runs(job_id)


@router.post("/jobs/{job_id}/kill", status_code=202)
async def kill(request: Request, job_id: int) -> Killed:
    return Killed(job_id=job_id, killed=await kill_job(WebState.of(request), job_id))


async def kill_job(state: WebState, job_id: int) -> bool:
    """The one kill both the API and the Kill button use: 404 unknown, 409 not running."""
    if await state.debug.job(job_id) is None:
        raise HTTPException(404, f"no job {job_id}")
    if not await state.runtime.jobs.kill_job(job_id):
        raise HTTPException(409, f"job {job_id} is not running")
    return True


@router.get("/runs")
async def runs(request: Request) -> Runs:
    """The newest tic runs and cron runs, newest first."""
    debug = WebState.of(request).debug
    return Runs(tic=await debug.tic_runs(), cron=await debug.job_runs())


@router.get("/approvals")
async def approvals(request: Request) -> list[ApprovalInfo]:
    """Requests still waiting for a decision, oldest first."""
    return await WebState.of(request).debug.approvals()


@router.get("/cluster")
async def cluster(request: Request) -> ClusterInfo:
    """This instance and its role; with a cluster every instance (live or dead), every lease and
    the leader (docs/operations/cluster.md)."""
    return await WebState.of(request).debug.cluster()
