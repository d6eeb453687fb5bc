# /context и /compact (bot/telegram/handlers/context.py)
menu-context = Насколько заполнена моя память об этом чате
menu-compact = Сжать старые сообщения в сводку
context-tokens = 🧠 Следующий запрос: около <b>{ $tokens }</b> токенов ({ $how }).
context-measured = по данным модели
context-estimated = оценка по длине текста
context-messages = Сообщений целиком: { $messages }
context-threshold = Сжатие при { $threshold } токенах, последние { $keep } сообщений сохраняются.
context-compaction-off = Сжатие выключено (включается параметром <code>llm.compaction.threshold_tokens</code>).
context-no-summary = Сводки пока нет: разговор отправляется целиком.
context-summary = 📝 Сводка заменяет { $rows } самых старых сообщений, до { $until }; сделана { $made }.
compact-done = 📝 Готово: { $rows } старых сообщений теперь в сводке.
compact-nothing = Сжимать пока нечего: разговор короткий.
compact-failed = ⚠️ Не удалось сделать сводку (модель не ответила). Ничего не изменилось.
compact-busy = Я сейчас работаю над запросом; сожму сам, когда понадобится.
compact-off = Сжатие выключено. Задайте <code>llm.compaction.threshold_tokens</code> в config.yml.
