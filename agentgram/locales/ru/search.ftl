# /search (bot/telegram/handlers/context.py)
menu-search = Найти, о чём мы говорили
search-usage = Напишите, что искать: <code>/search слова</code>. Я ищу по всем разговорам этого чата, и по прежним тоже.
search-none = В разговорах этого чата нет ничего про «{ $words }».
search-found = 🔎 { $count ->
    [one] Нашлось { $count } сообщение
    [few] Нашлось { $count } сообщения
   *[other] Нашлось { $count } сообщений
} про «{ $words }» (нажмите номер, чтобы прочитать весь обмен):
search-by-user = 👤
search-by-assistant = 🤖
search-exchange = 🗂 <i>{ $when }</i>
    <b>Вы:</b> { $question }

    <b>Ответ:</b> { $answer }
search-no-answer = <i>(ответа не было)</i>
search-gone = Этого сообщения больше нет.
