# The web view (web.*) and /trace
# { $url } arrives escaped.
trace-link = 🔎 <a href="{ $url }">This conversation in the web view</a> (session { $id })
trace-off = 🔎 The web view is off. Set <code>web.enabled</code>, <code>web.token</code> and <code>web.public_url</code> in the config to get a link here.
trace-no-url = 🔎 The web view is on, but it has no public address to link to. Set <code>web.public_url</code> in the config to get a link here.
