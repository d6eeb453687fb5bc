# Выбор модели (/model) и расход (/cost)
models-title = 🧠 <b>Модель</b>: { $name } — <code>{ $model }</code>
models-pick = Выберите модель для этого разговора (со следующего запроса):
models-item = • <b>{ $name }</b> — <code>{ $model }</code>
models-item-details = • <b>{ $name }</b> — <code>{ $model }</code> · { $details }
models-price = { $input } / { $output } за 1 млн токенов
models-switched = 🧠 Теперь этот разговор использует <b>{ $name }</b> (<code>{ $model }</code>).
models-switched-toast = Теперь: { $name }
models-unknown = ⚠️ Модели «{ $name }» нет. Список — /model.
models-unknown-toast = Этой модели больше нет в настройках.
models-only-one = 🧠 <b>Модель</b>: <code>{ $model }</code>. Другие модели можно добавить в <code>llm.models</code> в config.yml.
cost-empty = 📊 В этом разговоре ещё не было запросов к модели.
cost-title = 📊 <b>Этот разговор</b>: { $rounds ->
        [one] { $rounds } запрос к модели
        [few] { $rounds } запроса к модели
       *[many] { $rounds } запросов к модели
    }
cost-tokens = Токены запроса: { $input } · токены ответа: { $output }
cost-line = • <code>{ $model }</code>: { $input } + { $output } токенов
cost-line-priced = • <code>{ $model }</code>: { $input } + { $output } токенов · ≈ { $cost }
cost-total = Стоимость: ≈ { $cost }
cost-total-partial = Стоимость: ≈ { $cost } (не для всех моделей заданы цены)
cost-no-prices = Цены не заданы (<code>prices</code> в разделе llm файла config.yml) — только токены.
menu-model = Выбрать модель
menu-cost = Токены и стоимость этого разговора
