# Веб-просмотр (web.*) и /trace
# { $url } приходит экранированным.
trace-link = 🔎 <a href="{ $url }">Этот разговор в веб-просмотре</a> (сессия { $id })
trace-off = 🔎 Веб-просмотр выключен. Задайте <code>web.enabled</code>, <code>web.token</code> и <code>web.public_url</code> в конфиге, чтобы получить сюда ссылку.
