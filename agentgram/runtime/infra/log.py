"""Named loggers and the redaction rule, in one place.

Every module asks :func:`get_logger` for ``agentgram.<area>``. Log records
pass through :class:`RedactingFilter`, which masks registered secrets
(tokens, API keys) wherever they appear, including inside exception text and
URLs (HTTP clients log request URLs, and a chat platform's may hold its bot
token). Message and tool payloads are logged only as sizes unless
``logging.redact_payloads`` is off; call :func:`payload` for them.

Operator lines (one per turn, approval decision, scheduled run, LLM error)
carry their facts twice: readable in the message, and as ``extra`` fields
that :class:`JsonFormatter` (``logging.format: json``) emits as keys.
Libraries stay at WARNING unless ``logging.level: DEBUG`` and
``logging.libraries: true``: the level applies to agentgram's own loggers, and
every other logger — aiosqlite, httpx, a chat adapter's library, any — follows
the root's, which is WARNING then. No library needs naming here (the runtime
knows no chat platform); :data:`LIBRARIES` are also set, in case one sets its own.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from urllib.parse import parse_qsl

ROOT = "agentgram"
_secrets: set[str] = set()
_redact_payloads = True
_TOKEN_IN_URL = re.compile(r"/bot\d+:[A-Za-z0-9_-]+")
_CREDENTIAL_PARAM = re.compile(r"token|key|secret|passw|auth|sig", re.IGNORECASE)
LIBRARIES = ("aiosqlite", "aiohttp", "httpx", "httpx2", "httpcore", "apscheduler", "openai")
"""Third-party loggers set to WARNING (or DEBUG) explicitly; all others follow the root logger."""
_RECORD_KEYS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def get_logger(area: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT}.{area}")


def register_secret(value: str) -> None:
    if value and len(value) >= 4:
        _secrets.add(value)


WALKED_MIN = 8
"""The shortest ``SecretStr`` value :func:`register_secrets` masks: ``mcp.servers.*.env`` holds every
variable as a secret, and masking ``LOG_LEVEL: info`` would hide the word "info" everywhere. The
tokens that matter are longer; the LLM key and the bot token are registered whatever their length."""


def register_secrets(value: object) -> None:
    """Register every secret ``value`` holds at any depth: each ``SecretStr``, and a URL's
    password and credential-named query values (``?api_key=…``). Walking the settings as a
    whole masks a secret added to the config later without anyone remembering to register it."""
    from pydantic import AnyUrl, BaseModel, SecretStr  # here: `agentgram --version` imports this module

    match value:
        case SecretStr():
            secret = value.get_secret_value()
            if len(secret) >= WALKED_MIN:  # a short "secret" (an env value such as "info") is a word
                register_secret(secret)
        case AnyUrl():
            register_secret(value.password or "")
            for name, given in parse_qsl(value.query or ""):
                if _CREDENTIAL_PARAM.search(name):
                    register_secret(given)
        case BaseModel():
            for name in type(value).model_fields:
                register_secrets(getattr(value, name))
        case dict():
            for item in value.values():
                register_secrets(item)
        case list() | tuple() | set() | frozenset():
            for item in value:
                register_secrets(item)


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


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, then the record's ``extra`` fields.

    The whole line is redacted again, so a secret in a field value is masked too.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_KEYS and not key.startswith("_"):
                entry[key] = value if isinstance(value, int | float | bool | None) else str(value)
        if record.exc_info and record.exc_info[1] is not None:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return redact(json.dumps(entry, ensure_ascii=False))


def configure(
    level: str = "INFO", redact_payloads: bool = True, *, libraries: bool = False, fmt: str = "text"
) -> None:
    """Set up stderr logging with redaction on every handler, libraries quiet unless asked."""
    global _redact_payloads
    _redact_payloads = redact_payloads
    handler = logging.StreamHandler()
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(JsonFormatter() if fmt == "json" else text)
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    verbose = libraries and level == "DEBUG"
    own = logging.getLevelNamesMapping()[level.upper()]
    root.setLevel(own if verbose else max(own, logging.WARNING))
    logging.getLogger(ROOT).setLevel(own)
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)
