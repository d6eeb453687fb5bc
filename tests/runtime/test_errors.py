"""The one classification of failures: HTTP statuses to kinds, and every kind's user text."""

from __future__ import annotations

import pytest

from agentgram.runtime.infra.errors import Failure, FailureKind, LLMError, kind_for_status
from agentgram.runtime.infra.i18n import Translator


@pytest.mark.parametrize(
    ("status", "message", "code", "kind"),
    [
        (500, "", None, FailureKind.UNAVAILABLE),
        (502, "Bad gateway", None, FailureKind.UNAVAILABLE),
        (409, "conflict", None, FailureKind.UNAVAILABLE),
        (408, "", None, FailureKind.TIMEOUT),
        (429, "Rate limit reached", None, FailureKind.RATE_LIMITED),
        (401, "", "invalid_api_key", FailureKind.AUTH_FAILED),
        (403, "", None, FailureKind.AUTH_FAILED),
        (404, "The model `x` does not exist", "model_not_found", FailureKind.MODEL_NOT_FOUND),
        (400, "whatever the words", "context_length_exceeded", FailureKind.CONTEXT_TOO_LONG),
        (400, "the request exceeds the available context size", None, FailureKind.CONTEXT_TOO_LONG),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", None, FailureKind.CONTEXT_TOO_LONG),
        (413, "Payload Too Large", None, FailureKind.CONTEXT_TOO_LONG),
        (400, "Invalid value for 'messages[1].role'", None, FailureKind.BAD_REQUEST),
        (422, "", None, FailureKind.BAD_REQUEST),
    ],
)
def test_http_errors_map_to_one_kind(status: int, message: str, code: str | None, kind: FailureKind) -> None:
    assert kind_for_status(status, message, code) is kind


def test_only_failures_that_may_pass_are_retriable() -> None:
    retriable = {k for k in FailureKind if k.retriable}
    assert retriable == {
        FailureKind.UNAVAILABLE,
        FailureKind.TIMEOUT,
        FailureKind.RATE_LIMITED,
        FailureKind.UNREACHABLE,
        FailureKind.STREAM_CUT,
    }
    assert not LLMError("x", kind=FailureKind.AUTH_FAILED, status=401).retriable


@pytest.fixture(scope="module")
def tr() -> Translator:
    return Translator()


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("kind", list(FailureKind))
def test_every_kind_has_its_own_text_in_every_locale(tr: Translator, lang: str, kind: FailureKind) -> None:
    failure = Failure(kind, status=500 if kind is FailureKind.UNAVAILABLE else None, model="gpt-main")
    assert failure.locale_key in tr.keys(lang)
    text = tr.t(lang, failure.locale_key, **failure.params)
    assert text.startswith("⚠️") and "{" not in text


def test_internal_failures_get_the_generic_text_and_no_details(tr: Translator) -> None:
    assert Failure().locale_key == "turn-failed"
    assert tr.t("en", "turn-failed") == "⚠️ Something went wrong on my side; the details are in the log."


def test_the_status_is_named_only_when_there_was_one(tr: Translator) -> None:
    with_status = Failure(FailureKind.UNAVAILABLE, status=500)
    without = Failure(FailureKind.UNAVAILABLE)
    assert tr.t("en", with_status.locale_key, **with_status.params) == (
        "⚠️ The model is not answering (HTTP 500) — send your message again in a moment."
    )
    assert tr.t("en", without.locale_key, **without.params) == (
        "⚠️ The model is not answering — send your message again in a moment."
    )


def test_a_missing_model_is_named(tr: Translator) -> None:
    failure = LLMError("HTTP 404: no such model", kind=FailureKind.MODEL_NOT_FOUND, status=404, model="gpt-x")
    text = tr.t("en", failure.failure.locale_key, **failure.failure.params)
    assert "“gpt-x”" in text and "llm.model" in text
