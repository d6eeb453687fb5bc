"""Secrets never reach the logs, wherever they appear in a record."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from agentgram.runtime.infra.log import (
    LIBRARIES,
    RedactingFilter,
    configure,
    get_logger,
    payload,
    register_secret,
)


def _capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = get_logger("test-redaction")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_registered_secrets_and_bot_urls_are_masked() -> None:
    register_secret("sk-very-secret-key")
    logger, stream = _capture()
    logger.info(
        "calling %s with key %s", "https://api.telegram.org/bot123456:AAAbbbCCC/getMe", "sk-very-secret-key"
    )
    try:
        raise ValueError("bad key sk-very-secret-key")
    except ValueError:
        logger.exception("failed")
    out = stream.getvalue()
    assert "sk-very-secret-key" not in out
    assert "123456:AAAbbbCCC" not in out
    assert "/bot***" in out and "***" in out
    assert "ValueError" in out


def test_payloads_are_sizes_by_default() -> None:
    assert payload("my diary entry") == "<14 chars>"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure() rewires the root logger; put it back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    libraries = {
        name: logging.getLogger(name).level for name in (*LIBRARIES, "telegram.ext.ExtBot", "agentgram")
    }
    yield
    root.handlers[:], root.level = handlers, level
    for name, saved in libraries.items():
        logging.getLogger(name).setLevel(saved)
    configure_payloads(True)


def configure_payloads(redact: bool) -> None:
    import agentgram.runtime.infra.log as runtime_log

    runtime_log._redact_payloads = redact


def test_libraries_stay_at_warning_unless_debug_with_libraries(restore_logging: None) -> None:
    configure("DEBUG")
    assert logging.getLogger("aiosqlite").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("telegram.ext.ExtBot").getEffectiveLevel() == logging.WARNING
    configure("INFO", libraries=True)
    assert logging.getLogger("aiosqlite").getEffectiveLevel() == logging.WARNING
    configure("DEBUG", libraries=True)
    assert logging.getLogger("aiosqlite").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)
    assert get_logger("turn").isEnabledFor(logging.DEBUG)


def test_json_format_writes_one_parseable_object_a_line_with_secrets_masked(restore_logging: None) -> None:
    register_secret("sk-json-secret-key")
    configure("INFO", fmt="json")
    [handler] = logging.getLogger().handlers
    stream = io.StringIO()
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    logger = get_logger("test-json")
    logger.info("turn %s key=%s", 7, "sk-json-secret-key", extra={"turn": 7, "note": "sk-json-secret-key"})
    logger.warning("plain line")
    out = stream.getvalue()
    assert "sk-json-secret-key" not in out
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["level"] == "INFO" and first["logger"] == "agentgram.test-json"
    assert first["message"] == "turn 7 key=***" and first["turn"] == 7 and first["note"] == "***"
    assert first["time"].endswith("+00:00")
    assert second["message"] == "plain line" and "turn" not in second
