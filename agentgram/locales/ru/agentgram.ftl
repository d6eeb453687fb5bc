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
# $web: "on" — /trace в списке (веб-просмотр включён), "off" — без него.
help-text =
    <b>Команды</b>
    /start — обо мне
    /help — этот список
    /new — начать разговор заново
    /stop — остановить то, что я сейчас делаю (/stop all — и запущенные мной сессии)
    /pause — приостановиться после текущего шага
    /resume — продолжить приостановленную задачу
    /approvals — запросы, ждущие вашего решения
    /trust — что мне можно делать без спроса
    /tic — мои регулярные проверки
    /cron — задачи по расписанию
    /model — выбрать модель
    /sessions — сессии, открытые в этом чате, и запущенные мной
    /rollback — отменить изменения файлов недавнего хода
    /cost — токены и стоимость этого разговора
    /todos — мой список задач в этом разговоре
    /jobs — команды, которые выполняются в фоне
    /skills — процедуры, которые я умею загружать
    /mcp — серверы инструментов и их состояние
    /search — найти, о чём мы говорили
    /context — насколько заполнена моя память об этом чате
    /compact — сжать старые сообщения в сводку{ $web ->
        [on] {""}
            /trace — этот разговор в веб-просмотре
       *[off] {""}
    }

    <b>Кроме текста</b>
    📷 фото — я их рассматриваю
    🎙 голосовые, аудио и видеокружки — я их расшифровываю и показываю, что услышал
    📎 файлы — сохраняю в рабочей папке и читаю оттуда
    Файлы я умею и присылать.
not-allowed = Это частный бот. Ваш ID в Telegram: <code>{ $id }</code>.
pairing-asked =
    Это частный бот. Ваш ID в Telegram: <code>{ $id }</code>.

    Я попросил владельца вас впустить. Отправьте ему этот код, чтобы он знал, что запрос ваш: <code>{ $code }</code>
pairing-request =
    👤 Пользователь <code>{ $id }</code> ({ $user }) просит доступ к боту.
    Код: <code>{ $code }</code>
pairing-request-approved = ✅ Пользователь <code>{ $id }</code> ({ $user }) теперь может пользоваться ботом.
pairing-request-denied = ❌ Пользователю <code>{ $id }</code> ({ $user }) отказано.
pairing-welcome = ✅ Владелец вас впустил. Отправьте сообщение ещё раз — я отвечу.
pairing-refused = Владелец отклонил ваш запрос.
group-not-enabled = В этой группе я не включён. Владелец может включить меня, добавив её id <code>{ $id }</code> в <code>telegram.groups.allowed_chat_ids</code>.
unsupported-content = Я понимаю текст, фото, голосовые и файлы — а такие сообщения пока нет, извините. Пришлите, пожалуйста, иначе.
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
noted-busy-after = ⏭ Принято — займусь этим, когда закончу.
btn-queued-now = ⚡ Сейчас
btn-queued-after = ⏭ После
btn-queued-cancel = 🗑 Отменить
queued-now = ⚡ Останавливаюсь и берусь за это.
queued-after = ⏭ Займусь следующим, когда закончу.
queued-cancelled = 🗑 Отменено — читать не буду.
queued-folded = 📝 Учтено на шаге { $step }.
queued-already-read = Уже прочитано на шаге { $step } — ничего не изменилось.
queued-already-cancelled = Уже отменено — ничего не изменилось.
queued-gone = Эта кнопка больше не работает.
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
tool-interrupted = ⚠️ прервано
output-truncated = … (вывод обрезан)

## Подтверждения

approval-title = 🔐 <b>Нужно ваше подтверждение</b>
approval-command = Выполнить команду в <code>{ $workdir }</code>:
approval-file = Изменить файл <code>{ $path }</code>:
approval-new-file = (новый файл)
approval-diff-cut = … (показано не полностью — полный текст во вложении)
approval-no-change = (без изменений: в файле уже ровно такой текст)
approval-empty-file = (пустой файл)
approval-args = Вызвать <code>{ $tool }</code> с параметрами:
# Вызов, который только читает путь, словами; $outside — "yes" вне рабочей папки, иначе "no".
approval-read-file = { $outside ->
    [yes] Прочитать файл вне рабочей папки: <code>{ $path }</code>
   *[no] Прочитать файл: <code>{ $path }</code>
}
approval-list-dir = { $outside ->
    [yes] Показать содержимое папки вне рабочей папки: <code>{ $path }</code>
   *[no] Показать содержимое папки: <code>{ $path }</code>
}
approval-send-file = { $outside ->
    [yes] Прислать вам файл не из рабочей папки: <code>{ $path }</code>
   *[no] Прислать вам файл: <code>{ $path }</code>
}
approval-read = { $outside ->
    [yes] Читать вне рабочей папки через <code>{ $tool }</code>: <code>{ $path }</code>
   *[no] Читать через <code>{ $tool }</code>: <code>{ $path }</code>
}
btn-approve = ✅ Разрешить
btn-reject = ❌ Отклонить
btn-deny = ❌ Отказать
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
approval-only-requester = Решить это может только { $name }.
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
trust-bypass-on = ⏱ { $minutes } мин не буду спрашивать про { $scope }.
trust-bypass-until = ⏱ { $scope } — без подтверждений до { $until }
scope-all = что угодно
scope-fs_read = чтение файлов
scope-fs_read_outside = чтение файлов вне рабочей папки
scope-fs_write = изменения файлов
scope-shell = команды оболочки
scope-schedule = задачи по расписанию
scope-other = прочие инструменты
scope-tool = вызовы «{ $tool }»
btn-revoke = 🗑 Отозвать

## Tic (регулярные проверки)

tic-report-header = 🕰 <b>Регулярная проверка</b>
tic-status =
    <b>Регулярные проверки:</b> { $enabled }
    Расписание: { $schedule }
    Следующая: { $next }
    Последняя: { $last }
tic-on = 🕰 Регулярные проверки включены.
tic-off = 🕰 Регулярные проверки выключены.
tic-interval-set = 🕰 Буду проверять { $schedule }.
tic-started = 🕰 Запускаю проверку.
state-on = вкл.
state-off = выкл.
tic-never = ещё не было
tic-report-title = 🕰 Регулярная проверка
tic-nothing-to-do = 🕰 Проверять нечего: TIC.md пуст, tic.prompt не задан и с прошлой проверки ничего не произошло.
tic-deferred = 🕰 Проверю, как только закончу текущий запрос.
tic-bad-interval = ⚠️ Не могу задать такой интервал: { $error }
tic-usage = /tic — состояние; /tic now, /tic on, /tic off, /tic every 45m.
tic-last = { $when } — { $result }
tic-result-reported = отправлен отчёт
tic-result-silent = сообщать было нечего
tic-result-skipped = пропущена ({ $reason })
tic-result-skipped-plain = пропущена
tic-reason-nothing-to-do = проверять было нечего
tic-reason-quiet-hours = тихие часы
tic-result-deferred = ждала окончания вашего запроса
tic-result-failed = не удалась
tic-result-running = идёт сейчас

## Cron (задачи по расписанию)

cron-result-title = ⏰ { $title }
cron-no-output = (пусто)
cron-failed = ⚠️ Задача по расписанию <b>{ $title }</b> не выполнилась: { $error }
cron-list-header = <b>Задачи по расписанию</b>
cron-none = Задач по расписанию пока нет. Попросите меня что-нибудь запланировать, например: «каждое утро в 9 присылай погоду».
cron-added = ⏰ Задача «{ $title }» (<code>{ $id }</code>) запланирована: { $schedule }. Следующий запуск: { $next }.
cron-bad-schedule = ⚠️ Не могу так запланировать: { $error }
cron-killed = ⏹ Задача «{ $title }» (<code>{ $id }</code>) остановлена.
cron-not-running = Задача «{ $title }» (<code>{ $id }</code>) сейчас не выполняется.
cron-deleted = 🗑 Задача «{ $title }» удалена.
cron-paused = ⏸ Задача «{ $title }» приостановлена.
cron-resumed = ▶️ Задача «{ $title }» снова активна.
cron-finished = Задача «{ $title }» уже выполнена — продолжать нечего.
cron-confirm-delete = 🗑 Удалить задачу «{ $title }» (<code>{ $id }</code>)? Отменить это будет нельзя.
cron-card-deleted = 🗑 Удалена: { $title }
cron-card-gone = 🗑 Удалена
cron-not-found = Такой задачи нет.
cron-usage = /cron — список задач; /cron add &lt;расписание&gt; &lt;задание&gt; (например, <code>/cron add every 2h проверь сборку</code>); /cron kill &lt;номер&gt;.
cron-add-usage =
    Чтобы запланировать задачу, напишите /cron add, расписание и что сделать. Например:
    <code>/cron add every 2h проверь сборку</code>
    <code>/cron add 0 9 * * 1-5 сделай сводку по почте</code>
    <code>/cron add at 18:30 напомни позвонить Анне</code>
    <code>/cron add in 20m пора доставать пирог</code>
cron-item =
    { $state } <b>{ $title }</b> · <code>{ $id }</code>
    { $schedule }
    { $when }
cron-when-next = Следующий запуск: { $next }
cron-when-paused = Приостановлена.
cron-when-done = Выполнена: запусков больше не будет.
cron-next-none = —
cron-run-started = ▶️ Запускаю «{ $title }».
cron-already-running = Задача «{ $title }» уже выполняется.
cron-run-failed = ⚠️ Этот запуск не завершился; подробности — в журнале.
quiet-hours-digest-title = 🌙 Пока вы отдыхали ({ $count })
btn-run-now = ▶️ Запустить
btn-pause = ⏸ Пауза
btn-resume = ▶️ Продолжить
btn-delete = 🗑 Удалить
btn-confirm = ✅ Да
btn-cancel = ✖️ Отмена

## Как выглядят время, расписания и ошибки в расписании

time-in-zone = { $time } ({ $zone })
span-days = { $count } дн.
span-hours = { $count } ч
span-minutes = { $count } мин
span-seconds = { $count } с
schedule-every = каждые { $span }
schedule-cron = <code>{ $expr }</code> (cron, { $zone })
schedule-once = один раз, { $when }
schedule-error-empty = не указано расписание. Подойдёт crontab, например <code>0 9 * * 1-5</code>, или <code>every 2h</code>, <code>at 2026-12-01 09:00</code>, <code>in 20m</code>.
schedule-error-nothing = напишите расписание и что сделать, например <code>/cron add every 2h проверь сборку</code>.
schedule-error-no-prompt = после расписания <code>{ $spec }</code> напишите, что сделать.
schedule-error-macro = <code>{ $spec }</code> — неизвестное сокращение cron (известны: { $names }).
schedule-error-duration = в <code>{ $spec }</code> <code>{ $value }</code> — не промежуток времени (пример: <code>2h</code>, <code>45m</code>).
schedule-error-no-duration = в <code>{ $spec }</code> не хватает промежутка времени, например <code>every 2h</code> или <code>in 20m</code>.
schedule-error-too-frequent = <code>{ $spec }</code> — слишком часто: самый короткий интервал — { $shortest }.
schedule-error-not-positive = в <code>{ $spec }</code> задержка должна быть больше нуля.
schedule-error-at = в <code>{ $spec }</code> время пишется как <code>at ГГГГ-ММ-ДД ЧЧ:ММ</code> или <code>at ЧЧ:ММ</code>.
schedule-error-no-such-date = <code>{ $spec }</code> — такой даты и времени не бывает.
schedule-error-skipped-time = в <code>{ $spec }</code>: времени { $time } в зоне { $zone } не бывает (часы его пропускают).
schedule-error-past = <code>{ $spec }</code> — это уже прошло (сейчас { $now }).
schedule-error-fields = <code>{ $spec }</code> — не расписание: в crontab 5 полей (минута, час, день, месяц, день недели), а здесь { $count }. Или напишите <code>every 2h</code>, <code>at 18:30</code>, <code>in 20m</code>.
schedule-error-seconds = в <code>{ $spec }</code> { $count } полей, а в crontab их 5 (минута, час, день, месяц, день недели); секунды и годы не поддерживаются.
schedule-error-crontab = <code>{ $spec }</code> — неверный crontab: проверьте каждое поле (минута 0–59, час 0–23, день 1–31, месяц 1–12, день недели 0–7 или mon–sun).
schedule-error-never = <code>{ $spec }</code> не сработает ни разу.
schedule-error-zone = неизвестный часовой пояс <code>{ $zone }</code> (укажите имя IANA, например <code>Europe/Berlin</code>).

## Меню команд (setMyCommands)

menu-new = Начать разговор заново
menu-stop = Остановить то, что я делаю
menu-pause = Приостановиться на следующем шаге
menu-resume = Продолжить приостановленный запрос
menu-approvals = Запросы, ждущие подтверждения
menu-trust = Что мне можно без спроса
menu-tic = Мои регулярные проверки
menu-cron = Задачи по расписанию
menu-help = Что я умею
