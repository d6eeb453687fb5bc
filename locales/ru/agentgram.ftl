# agentgram — русские строки чата.
#
# Сообщения — это Telegram HTML: только теги <b>, <i>, <u>, <s>, <code>, <pre>,
# <a>, <blockquote>; символы <, > и & в тексте пишутся как &lt; &gt; &amp;.
# Параметры приходят уже экранированными.
# Каждый ключ должен быть во всех языках (tests/runtime/test_i18n.py).

## Старт, справка, доступ

start-greeting =
    👋 Привет! Я <b>agentgram</b> — ваш личный ИИ-агент.

    Пишите мне, как обычному собеседнику. Я умею читать и писать файлы и запускать команды в своей рабочей папке — всё, что что-то меняет, я сначала показываю вам на подтверждение.

    Что ещё я умею — в /help.
help-text =
    <b>Команды</b>
    /start — обо мне
    /help — этот список
    /new — начать разговор заново
    /stop — остановить то, что я сейчас делаю
    /pause — приостановиться после текущего шага
    /resume — продолжить приостановленную задачу
    /approvals — запросы, ждущие вашего решения
    /trust — что мне можно делать без спроса
    /tic — мои регулярные проверки
    /cron — задачи по расписанию
not-allowed = Извините, это частный бот.
group-not-supported = Пока я работаю только в личных чатах.
unsupported-content = Стикеры, фото и голосовые я пока не понимаю — напишите, пожалуйста, текстом.
unknown-command = Такой команды я не знаю.
quiet-hours-digest-header = 🌙 <b>Пока вас не было</b>

## Управление разговором

new-session = 🆕 Начинаем с чистого листа — прошлый разговор я забыл.
stopped = ⏹ Остановлено.
stopped-dropped =
    ⏹ Остановлено. { $count ->
        [one] Отброшено { $count } сообщение из очереди.
        [few] Отброшено { $count } сообщения из очереди.
       *[many] Отброшено { $count } сообщений из очереди.
        [other] Отброшено { $count } сообщения из очереди.
    }
nothing-to-stop = Останавливать нечего — я ничем не занят.
paused = ⏸ Пауза. Жду /resume, чтобы продолжить.
resumed = ▶️ Продолжаю.
nothing-to-resume = Продолжать нечего.
pausing = ⏸ Остановлюсь на следующем шаге (запущенный инструмент сначала доработает). Если успею закончить раньше — просто пришлю ответ.
nothing-to-pause = Ставить на паузу нечего — я ничем не занят.
noted-busy = 📝 Принято — прочитаю на следующем шаге.
noted-waiting-approval = 📝 Принято — но следующий шаг ждёт вашего решения по <code>{ $tool }</code>. Нажмите кнопку в запросе на подтверждение или ответьте на него с объяснением, чтобы отклонить.
mailbox-full = ⚠️ Слишком много непрочитанных сообщений — подождите, пока я разберусь, или отправьте /stop.
restarted-continuing = 🔄 Я перезапустился — продолжаю ваш последний запрос.

## Модель и ход работы

thinking = 💭 Думаю…
model-fallback = ⚠️ { $failed } не отвечает, переключаюсь на { $next }.
llm-error = ⚠️ Ошибка модели: { $error }
turn-exhausted = ⚠️ Лимит шагов ({ $rounds }) исчерпан, а к ответу я так и не пришёл — поэтому остановился. Подскажите, как быть дальше.
turn-failed = ⚠️ Что-то пошло не так на моей стороне; подробности — в журнале.
llm-unavailable = ⚠️ Модель не отвечает{ $status ->
        [0] {""}
       *[other] {" "}(HTTP { $status })
    } — отправьте сообщение ещё раз чуть позже.
llm-timeout = ⚠️ Модель слишком долго не отвечала — отправьте сообщение ещё раз чуть позже.
llm-rate-limited = ⚠️ Превышен лимит запросов к модели (HTTP 429) — подождите минуту и отправьте сообщение ещё раз.
llm-auth-failed = ⚠️ LLM-сервер отклонил API-ключ (HTTP { $status }) — проверьте llm.api_key в конфигурации.
llm-model-not-found = ⚠️ На LLM-сервере нет модели «{ $model }» (HTTP 404) — проверьте llm.model и llm.base_url в конфигурации.
llm-context-too-long = ⚠️ Разговор стал слишком длинным для модели — отправьте /new, чтобы начать новый.
llm-bad-request = ⚠️ Модель отклонила мой запрос (HTTP { $status }); подробности — в журнале. Если это повторится, отправьте /new, чтобы начать разговор заново.
llm-unreachable = ⚠️ Не могу связаться с LLM-сервером — проверьте, что он запущен и что llm.base_url указан верно, затем отправьте сообщение ещё раз.
llm-stream-cut = ⚠️ Ответ модели оборвался — отправьте сообщение ещё раз.
tool-running = ⏳ <code>{ $tool }</code>…
tool-done = ✅ <code>{ $tool }</code>
tool-failed = ❌ <code>{ $tool }</code>: ошибка
tool-rejected = 🚫 <code>{ $tool }</code>: отклонено
tool-cancelled = ⏹ <code>{ $tool }</code>: отменено
output-truncated = … (вывод обрезан)

## Подтверждения

approval-title = 🔐 <b>Нужно ваше подтверждение</b>
approval-command = Выполнить команду в <code>{ $workdir }</code>:
approval-file = Изменить файл <code>{ $path }</code>:
approval-new-file = (новый файл)
approval-diff-cut = … (показано не полностью — полный текст во вложении)
approval-args = Вызвать <code>{ $tool }</code> с параметрами:
btn-approve = ✅ Разрешить
btn-reject = ❌ Отклонить
btn-trust-15 = ⏱ 15 мин
btn-trust-always = 🔁 Всегда
approval-approved = ✅ Разрешено
approval-rejected = ❌ Отклонено
approval-rejected-reason = ❌ Отклонено: { $reason }
approval-cancelled = ⏹ Отменено
approval-expired = ⌛ Время вышло
approval-not-shown = ⚠️ Не удалось показать здесь запрос на подтверждение для <code>{ $tool }</code>, поэтому вызов не выполнен.
approval-stale = Этот запрос уже неактуален.
approval-not-yours = Эта кнопка не для вас.
approval-unknown-button = Эта кнопка больше не работает.
approval-reply-hint = Чтобы отклонить с объяснением, ответьте на это сообщение.
approvals-none = Ничего не ждёт вашего подтверждения.
approvals-list-header = <b>Ждут вашего подтверждения</b>

## Доверие

trust-none = Я спрашиваю перед любым действием, которое что-то меняет, — постоянных разрешений нет.
trust-header = <b>Что мне можно делать без спроса</b>
trust-revoked = Разрешение отозвано.
trust-always-confirm = 🔁 Всегда разрешать <code>{ $rule }</code> без вопросов?
trust-always-saved = 🔁 Сохранено: больше не буду спрашивать про <code>{ $rule }</code>.
trust-bypass-on = ⏱ Следующие { $minutes } мин не буду спрашивать подтверждения.
trust-bypass-until = без подтверждений до { $until }
btn-revoke = 🗑 Отозвать

## Tic (регулярные проверки)

tic-report-header = 🕰 <b>Регулярная проверка</b>
tic-status =
    <b>Регулярные проверки:</b> { $enabled }
    Интервал: { $interval }
    Следующая: { $next }
    Последняя: { $last }
tic-on = 🕰 Регулярные проверки включены.
tic-off = 🕰 Регулярные проверки выключены.
tic-interval-set = 🕰 Буду проверять каждые { $interval }.
tic-started = 🕰 Запускаю проверку.
state-on = вкл.
state-off = выкл.
tic-never = ещё не было
tic-report-title = 🕰 Регулярная проверка
tic-nothing-to-do = 🕰 Проверять нечего: TIC.md пуст, tic.prompt не задан и с прошлой проверки ничего не произошло.
tic-deferred = 🕰 Проверю, как только закончу текущий запрос.
tic-bad-interval = Не понимаю такой интервал: { $error }
tic-usage = /tic — состояние; /tic now, /tic on, /tic off, /tic every 45m.
tic-last = { $when } — { $result }
tic-result-reported = отправлен отчёт
tic-result-silent = сообщать было нечего
tic-result-skipped = пропущена ({ $reason })
tic-result-deferred = ждала окончания вашего запроса
tic-result-failed = не удалась
tic-result-running = идёт сейчас

## Cron (задачи по расписанию)

cron-result-title = ⏰ { $title }
cron-no-output = (пусто)
cron-failed = ⚠️ Задача по расписанию <b>{ $title }</b> не выполнилась: { $error }
cron-list-header = <b>Задачи по расписанию</b>
cron-none = Задач по расписанию пока нет. Попросите меня что-нибудь запланировать, например: «каждое утро в 9 присылай погоду».
cron-added = ⏰ Задача <code>{ $id }</code> запланирована. Следующий запуск: { $next }.
cron-bad-schedule = Не понимаю такое расписание: { $error }
cron-killed = ⏹ Задача <code>{ $id }</code> остановлена.
cron-not-running = Задача <code>{ $id }</code> сейчас не выполняется.
cron-deleted = 🗑 Задача удалена.
cron-paused = ⏸ Задача приостановлена.
cron-resumed = ▶️ Задача снова активна.
cron-confirm-delete = Удалить эту задачу? Отменить это будет нельзя.
cron-not-found = Такой задачи нет.
cron-usage = /cron — список задач; /cron add &lt;расписание&gt; &lt;задание&gt; (например, <code>/cron add every 2h проверь сборку</code>); /cron kill &lt;номер&gt;.
cron-item =
    { $state } <b>{ $title }</b> · <code>{ $id }</code>
    { $schedule }
    Следующий запуск: { $next }
cron-next-none = —
cron-run-started = ▶️ Запускаю.
cron-already-running = Задача уже выполняется.
cron-run-failed = ⚠️ Не выполнилась: { $error }
quiet-hours-digest-title = 🌙 Пока вы отдыхали ({ $count })
btn-run-now = ▶️ Запустить
btn-pause = ⏸ Пауза
btn-resume = ▶️ Продолжить
btn-delete = 🗑 Удалить
btn-confirm = ✅ Да
btn-cancel = ✖️ Отмена
