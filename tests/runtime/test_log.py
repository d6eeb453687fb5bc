"""Secrets never reach the logs, wherever they appear in a record."""

from __future__ import annotations

import io
import logging

from runtime.log import RedactingFilter, get_logger, payload, register_secret


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
    logger.info("calling %s with key %s", "https://api.telegram.org/bot123456:AAAbbbCCC/getMe", "sk-very-secret-key")
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
