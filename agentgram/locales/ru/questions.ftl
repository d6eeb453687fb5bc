# Уточняющие вопросы (ask_user_clarification)
question-title = ❓ <b>Вопрос</b>
question-reply-hint = Нажмите на ответ или просто напишите свой.
question-type-hint = Напишите ответ.
question-answered = ✅ { $answer }
question-superseded = ⏭ Заменён новым вопросом
question-cancelled = ⏹ Отменён
question-toast-answered = ✅ Ответ принят
question-toast-stale = Этот вопрос уже закрыт.
