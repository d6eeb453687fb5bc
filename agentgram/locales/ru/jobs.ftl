# Долгие команды: живая строка состояния отсоединённого вызова, её кнопка ⏹ и /jobs.
# { $command } приходит как <code>…</code>, экранированным; { $elapsed } — как «2 мин 10 с».
jobs-running = ⚙️ { $command } выполняется · { $elapsed }
jobs-finished = ✅ { $command } завершена · { $elapsed }
jobs-failed = ❌ { $command } завершилась с ошибкой · { $elapsed }
jobs-cancelled = ⏹ { $command } остановлена · { $elapsed }
jobs-orphaned = ⚠️ { $command } прервана перезапуском
jobs-stop = ⏹ Стоп
jobs-stop-numbered = ⏹ { $number }
jobs-toast-stopping = Останавливаю…
jobs-toast-gone = Эта команда уже не выполняется.
jobs-title = <b>Выполняющиеся команды</b>
jobs-item = { $number }. ⚙️ { $command } · { $elapsed }
jobs-none = Сейчас не выполняется ни одной команды.
menu-jobs = Команды, работающие в фоне
