# /search (bot/telegram/handlers/context.py)
menu-search = Find something we talked about
search-usage = Tell me what to look for: <code>/search words</code>. I search every conversation of this chat, earlier ones too.
search-none = Nothing in this chat's conversations matches “{ $words }”.
search-found = 🔎 { $count ->
    [one] One message matches
   *[other] { $count } messages match
} “{ $words }” (tap a number to read the whole exchange):
search-by-user = 👤
search-by-assistant = 🤖
search-exchange = 🗂 <i>{ $when }</i>
    <b>You:</b> { $question }

    <b>Answer:</b> { $answer }
search-no-answer = <i>(no answer was given)</i>
search-gone = That message is no longer there.
