"""Agent tools for scheduled jobs: ``schedule_job``, ``list_jobs``, ``update_job``, ``delete_job``.

They live with the scheduler, above :mod:`runtime.tools` (whose base classes
they use), so the tools package never imports the scheduler.

So "remind me in 20 minutes" just works: the model schedules a job whose
prompt runs later in its own headless session and whose result is sent to
this chat. The tools act through the scheduler service (database and
APScheduler together) and only ever see the jobs of the chat the session
belongs to (:attr:`ToolContext.chat_id`). A job scheduled in a forum topic
belongs to that topic (:attr:`ToolContext.thread_id`): its runs report there,
while the chat's jobs are still listed and edited together. A bad schedule or
an unknown job is a :class:`~runtime.errors.ToolError` the model reads, never a crash.

Approval seeds (``runtime/approvals/rules.py``): ``list_jobs``,
``schedule_job`` and ``update_job`` are allowed — scheduling only queues a
future model call whose result the user sees, and the user can list, pause
and delete jobs from ``/cron`` — while ``delete_job`` requires approval,
because it silently removes something the user set up (and in a headless
tic/cron session it is therefore refused).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import ArgsT, Tool, ToolArgs, ToolContext, ToolGroup, ToolScope
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.scheduler_rows import JobApprovals
from agentgram.runtime.scheduler.jobs import JobChanges
from agentgram.runtime.scheduler.schedule import describe
from agentgram.runtime.scheduler.values import Job, JobSpec

SCHEDULE_HELP = (
    "A 5-field crontab in the job's time zone ('0 9 * * 1-5' = weekdays at 9:00), "
    "an interval ('every 2h', 'every 30m'), or one shot ('in 20m', 'at 18:30', 'at 2026-12-01 09:00')."
)


APPROVALS_HELP = (
    "What happens when a run needs an approval-requiring action (a shell command, a file write): "
    "'deny' refuses it without asking (default); 'ask' sends the usual approval prompt to this chat."
)


class JobControl(Protocol):
    """What the tools need from the scheduler service."""

    async def add_job(self, spec: JobSpec) -> Job: ...

    async def list_jobs(self, chat_id: int | None = None) -> list[Job]: ...

    async def update_job(self, job_id: int, changes: JobChanges, *, chat_id: int | None = None) -> Job: ...

    async def set_enabled(self, job_id: int, enabled: bool, *, chat_id: int | None = None) -> Job: ...

    async def delete_job(self, job_id: int, *, chat_id: int | None = None) -> None: ...


def _chat(ctx: ToolContext) -> int:
    if ctx.chat_id is None:
        raise ToolError("this session has no chat to report to, so it cannot manage scheduled jobs")
    return ctx.chat_id


def job_line(job: Job) -> str:
    """``#3 “Inbox” — cron 0 9 * * 1-5 (Europe/Berlin); next 2026-03-30 09:00 CEST; enabled``."""
    upcoming = job.next_run
    when = f"next {upcoming.astimezone(job.zone):%Y-%m-%d %H:%M %Z}" if upcoming else "no next run"
    state = "enabled" if job.enabled else "paused"
    return (
        f"#{job.id} “{job.title}” — {describe(job.parsed, job.zone)} ({job.timezone}); "
        f"{when}; {state}; approvals: {job.approvals}"
    )


class _ScheduleTool(Tool[ArgsT]):
    group = ToolGroup.SCHEDULE
    scope = ToolScope.ROOT_ONLY  # jobs belong to the chat: a sub-agent's task does not schedule

    def __init__(self, control: JobControl) -> None:
        self.control = control


class ScheduleJobArgs(ToolArgs):
    title: str = Field(description="Short name shown to the user, e.g. 'Inbox summary'.")
    schedule: str = Field(description=SCHEDULE_HELP)
    prompt: str = Field(description="The instruction to carry out at each run, written for yourself.")
    timezone: str | None = Field(
        default=None, description="IANA zone such as 'Europe/Berlin'; default: the agent's zone."
    )
    approvals: Literal["deny", "ask"] = Field(default="deny", description=APPROVALS_HELP)


class ScheduleJob(_ScheduleTool[ScheduleJobArgs]):
    name = "schedule_job"
    description = (
        "Schedule a job: at each run the prompt is carried out in a fresh session and the result is "
        "sent to this chat. Use it for reminders ('in 20m'), recurring reports and one-off tasks."
    )
    Args = ScheduleJobArgs

    async def execute(self, args: ScheduleJobArgs, ctx: ToolContext) -> str:
        spec = JobSpec(
            title=args.title,
            schedule=args.schedule,
            prompt=args.prompt,
            chat_id=_chat(ctx),
            thread_id=ctx.thread_id,
            timezone=args.timezone,
            approvals=JobApprovals(args.approvals),
        )
        return "Scheduled " + job_line(await self.control.add_job(spec))


class ListJobsArgs(ToolArgs):
    pass


class ListJobs(_ScheduleTool[ListJobsArgs]):
    name = "list_jobs"
    description = "List this chat's scheduled jobs with their schedules and next run times."
    idempotent = True
    Args = ListJobsArgs

    async def execute(self, args: ListJobsArgs, ctx: ToolContext) -> str:
        jobs = await self.control.list_jobs(_chat(ctx))
        if not jobs:
            return "No scheduled jobs."
        return "\n".join(job_line(job) for job in jobs)


class UpdateJobArgs(ToolArgs):
    id: int = Field(description="The job number from list_jobs.")
    title: str | None = None
    schedule: str | None = Field(default=None, description=SCHEDULE_HELP)
    prompt: str | None = None
    timezone: str | None = None
    approvals: Literal["deny", "ask"] | None = Field(default=None, description=APPROVALS_HELP)
    enabled: bool | None = Field(default=None, description="false pauses the job, true resumes it.")


class UpdateJob(_ScheduleTool[UpdateJobArgs]):
    name = "update_job"
    description = "Change a scheduled job's title, schedule, prompt or time zone, or pause/resume it."
    Args = UpdateJobArgs

    async def execute(self, args: UpdateJobArgs, ctx: ToolContext) -> str:
        chat_id = _chat(ctx)
        changes = JobChanges(
            title=args.title,
            schedule=args.schedule,
            timezone=args.timezone,
            prompt=args.prompt,
            approvals=JobApprovals(args.approvals) if args.approvals else None,
        )
        job = await self.control.update_job(args.id, changes, chat_id=chat_id)
        if args.enabled is not None and args.enabled != job.enabled:
            job = await self.control.set_enabled(args.id, args.enabled, chat_id=chat_id)
        return "Updated " + job_line(job)


class DeleteJobArgs(ToolArgs):
    id: int = Field(description="The job number from list_jobs.")


class DeleteJob(_ScheduleTool[DeleteJobArgs]):
    name = "delete_job"
    description = "Delete a scheduled job for good (a running one is stopped first)."
    Args = DeleteJobArgs

    async def execute(self, args: DeleteJobArgs, ctx: ToolContext) -> str:
        await self.control.delete_job(args.id, chat_id=_chat(ctx))
        return f"Deleted job #{args.id}."


def schedule_tools(control: JobControl) -> list[Tool[Any]]:
    return [ScheduleJob(control), ListJobs(control), UpdateJob(control), DeleteJob(control)]
