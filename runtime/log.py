"""Named loggers and the redaction rule, in one place.

Every module asks :func:`get_logger` for ``agentgram.<area>``. Log records
pass through :class:`RedactingFilter`, which masks registered secrets
(tokens, API keys) wherever they appear, including inside exception text and
URLs (python-telegram-bot and httpx log request URLs that contain the bot
token). Message and tool payloads are logged only as sizes unless
``logging.redact_payloads`` is off; call :func:`payload` for them.
"""

from __future__ import annotations

import logging
import re

ROOT = "agentgram"
_secrets: set[str] = set()
_redact_payloads = True
_TOKEN_IN_URL = re.compile(r"/bot\d+:[A-Za-z0-9_-]+")


def get_logger(area: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT}.{area}")


def register_secret(value: str) -> None:
    if value and len(value) >= 4:
        _secrets.add(value)


def payload(text: str) -> str:
    """A loggable stand-in for user or tool content."""
    return f"<{len(text)} chars>" if _redact_payloads else text


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return _TOKEN_IN_URL.sub("/bot***", text)


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, ()
        return True


def configure(level: str = "INFO", redact_payloads: bool = True) -> None:
    """Set up stderr logging with redaction on every handler."""
    global _redact_payloads
    _redact_payloads = redact_payloads
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpx2", "httpcore", "telegram.ext.ExtBot", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
