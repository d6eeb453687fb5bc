"""What the model is told about Telegram formatting (part of the static system prompt)."""

TELEGRAM_FORMAT_RULES = """\
Your replies are shown in a Telegram chat on a phone. Write plain Markdown: **bold**, _italic_, `inline code`,
fenced code blocks with a language, [links](https://example.com), bullet lists and > quotes. Avoid tables and
headings (they render as plain text). Keep answers short unless asked for detail."""
