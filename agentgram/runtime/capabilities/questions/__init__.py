"""Clarifying questions: the ``ask_user_clarification`` tool and the pending questions it waits on.

It sits beside approvals and the mailbox: a question suspends its turn as
the approval gate does, and the answer arrives as mail the facade
(:mod:`runtime.app`) accepts before applying it.
"""

from agentgram.runtime.capabilities.questions.manager import Asked, QuestionManager, Settled
from agentgram.runtime.capabilities.questions.tool import AskUserClarification, question_resolved

__all__ = ["AskUserClarification", "Asked", "QuestionManager", "Settled", "question_resolved"]
