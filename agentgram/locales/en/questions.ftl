# Clarifying questions (ask_user_clarification)
question-title = ❓ <b>Question</b>
question-reply-hint = Tap an answer or just type yours.
question-type-hint = Type your answer.
question-answered = ✅ { $answer }
question-superseded = ⏭ Superseded
question-cancelled = ⏹ Cancelled
question-toast-answered = ✅ Answered
question-toast-stale = This question is no longer open.
