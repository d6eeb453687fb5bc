# Чат в терминале (agentgram chat)
terminal-welcome = <b>agentgram</b> — напишите сообщение. /help — список команд; Ctrl-C останавливает ответ, дважды — выход.
terminal-help =
    <b>Команды</b>
    /new — начать новый разговор
    /stop — остановить то, что я делаю (или Ctrl-C)
    /pause — пауза на следующем шаге; /resume — продолжить
    /approvals — что ждёт вашего одобрения
    /rollback — отменить изменения файлов недавнего хода; /rollback &lt;ход&gt; — этого
    /now, /after, /cancel — для сообщения, отправленного пока я работаю: заняться сейчас, после этого хода или отменить
    /cron — ваши задачи по расписанию; /cron kill &lt;id&gt; — остановить запущенную
    /exit — выйти (или Ctrl-D, или дважды Ctrl-C)
terminal-queued-hint = <i>/now — заняться сейчас · /after — после этого хода · /cancel — отменить</i>
terminal-nothing-queued = Ни одно сообщение не ждёт текущего хода.
terminal-unknown-command = Я не знаю такой команды.
terminal-history = <i>— ранее в этом разговоре —</i>
terminal-working = … работаю
terminal-bye = До встречи.
terminal-line-failed = Эту строку обработать не удалось (подробности в журнале); введите другую.
terminal-stopping = ⏹ Останавливаюсь. (Ещё раз Ctrl-C в течение 2 с — выход.)
terminal-interrupt-idle = Нечего останавливать. (Ещё раз Ctrl-C в течение 2 с — выход.)
terminal-approval-title = 🔐 <b>Нужно одобрение:</b> <code>{ $tool }</code>
terminal-approval-command = Выполнить команду в <code>{ $workdir }</code>:
terminal-approval-file = Изменить файл <code>{ $path }</code>:
terminal-approval-answer = Ответьте <b>y</b>, чтобы выполнить, <b>n</b> или <b>n &lt;причина&gt;</b>, чтобы отказать, <b>{ $minutes }m</b>, чтобы доверять таким вызовам { $minutes } мин, <b>always</b>, чтобы сохранить правило.
terminal-approval-answer-no-always = Ответьте <b>y</b>, чтобы выполнить, <b>n</b> или <b>n &lt;причина&gt;</b>, чтобы отказать, <b>{ $minutes }m</b>, чтобы доверять таким вызовам { $minutes } мин.
terminal-approval-prompt = одобрить? ›
terminal-approval-unclear = Ответьте y, n, n &lt;причина&gt;, { $minutes }m или always.
terminal-approval-unclear-no-always = Ответьте y, n, n &lt;причина&gt; или { $minutes }m.
terminal-approval-waiting = ⏳ <code>{ $tool }</code> { $summary } ждёт вашего одобрения.
terminal-trusted = ⏱ Не буду спрашивать про <code>{ $scope }</code> { $minutes } мин.
terminal-always-saved = 🔁 Сохранено: больше не спрошу про такие вызовы <code>{ $tool }</code>.
terminal-question-prompt = ответ ›
terminal-question-options = Ответьте номером или своими словами.
terminal-cron-usage = /cron — список задач по расписанию; /cron kill &lt;id&gt; — остановить запущенную.
terminal-cron-item = { $state } <b>{ $title }</b> · <code>{ $id }</code> · { $schedule } · далее: { $next }
terminal-cron-result = ⏰ <b>{ $title }</b>
terminal-file = 📎 <code>{ $path }</code> { $caption }
terminal-call-detached = ⏳ <code>{ $tool }</code> { $summary } продолжает работать в фоне.
terminal-call-finished = <code>{ $tool }</code> { $summary }: { $status }
terminal-rollback-choose = Введите <b>/rollback &lt;ход&gt;</b>, чтобы увидеть, что отменит откат хода.
terminal-rollback-usage = Введите <b>/rollback</b> — ходы, менявшие файлы; <b>/rollback &lt;ход&gt;</b> — один из них.
terminal-rollback-answer = Ответьте <b>y</b>, чтобы отменить, <b>n</b>, чтобы оставить файлы как есть.
terminal-rollback-prompt = отменить? ›
terminal-rollback-diff-cut = … ещё { $count } строк диффа не показаны.
