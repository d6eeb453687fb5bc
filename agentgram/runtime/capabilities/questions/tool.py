"""``ask_user_clarification``: the agent asks the user and waits for the answer.

The call's turn is suspended inside :meth:`AskUserClarification.execute`
until the question is settled, as a call waits in the approval gate: a tapped
option or the next text the user sends is the answer and the call's result;
a newer question supersedes it (the model reads that); a /stop cancels the
turn's task, and the turn's clean-up cancels the question
(:func:`runtime.turn.loop.settle_cancelled`). After a restart the resumed turn
runs the call again and finds the same question, still answerable — it is
shown again only if it never reached the chat.

It is not offered to headless sessions (``asks_user``): nobody reads a tic's
or a cron run's chat to answer. It is offered to every agent of a call stack,
re-added once per level (``per_level``).
"""

from __future__ import annotations

from pydantic import Field

from agentgram.runtime.capabilities.questions.manager import QuestionManager
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolScope
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import Address, EventBus, QuestionAsked, QuestionResolved, QuestionStatus
from agentgram.runtime.infra.storage.question_rows import QuestionRow

SUPERSEDED = "The user did not answer: a newer question replaced this one."
CANCELLED = "The user did not answer: the question was cancelled."
MAX_OPTIONS = 8


class AskArgs(ToolArgs):
    question: str = Field(
        min_length=1, max_length=2000, description="The question, as the user should read it."
    )
    options: list[str] = Field(
        default_factory=list,
        max_length=MAX_OPTIONS,
        description="Suggested answers, each shown as a button (short). The user may also type any answer.",
    )


class AskUserClarification(Tool[AskArgs]):
    name = "ask_user_clarification"
    description = (
        "Ask the user a question when you are unsure how to proceed, and wait for the answer "
        "(a tapped option or the user's own words). Ask one clear question; suggest options when "
        "there are a few likely answers. The answer is this tool's result."
    )
    scope = ToolScope.PER_LEVEL
    asks_user = True
    Args = AskArgs

    def __init__(self, questions: QuestionManager, bus: EventBus) -> None:
        self.questions = questions
        self.bus = bus

    async def execute(self, args: AskArgs, ctx: ToolContext) -> str:
        if ctx.source in ("tic", "cron") or ctx.chat_id is None or ctx.tool_call_id is None:
            raise ToolError("nobody can answer a question in this session; decide on your own")
        address = ctx.address
        options = [" ".join(option.split()) for option in args.options if option.strip()]
        asked = await self.questions.ask(
            ctx.session_id, ctx.tool_call_id, ctx.chat_id, args.question, options
        )
        for old in asked.superseded:
            self.bus.emit(question_resolved(address, old))
        if asked.show:
            self.bus.emit(
                QuestionAsked(
                    to=address,
                    question_id=asked.row.id,
                    question=asked.row.question,
                    options=tuple(asked.row.options),
                )
            )
        settled = await self.questions.wait(asked.row.id)
        if settled.status == QuestionStatus.ANSWERED:  # superseded and cancelled are told where settled
            self.bus.emit(question_resolved(address, settled))
        return result_text(settled)


def question_resolved(address: Address, row: QuestionRow) -> QuestionResolved:
    """The one way a settled question is told to the adapter."""
    return QuestionResolved(
        to=address,
        question_id=row.id,
        question=row.question,
        status=QuestionStatus(row.status),
        answer=row.answer,
        message_id=row.message_id,
    )


def result_text(row: QuestionRow) -> str:
    """What the model reads: the answer itself, or why none came."""
    if row.status == QuestionStatus.ANSWERED:
        return row.answer or ""
    return SUPERSEDED if row.status == QuestionStatus.SUPERSEDED else CANCELLED


__all__ = ["AskArgs", "AskUserClarification", "question_resolved", "result_text"]
