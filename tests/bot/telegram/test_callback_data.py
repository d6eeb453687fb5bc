"""The button-data codec: every button round-trips within 64 bytes; garbage decodes to ``None``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgram.bot.telegram.core.callback_data import MAX_BYTES, Button, ButtonAction, decode, encode

opaque_args = st.from_regex(r"[A-Za-z0-9_\-]{1,40}", fullmatch=True)
buttons = st.builds(Button, st.sampled_from(list(ButtonAction)), opaque_args)


@given(buttons)
def test_every_button_round_trips_within_64_bytes(button: Button) -> None:
    data = encode(button)
    assert len(data.encode()) <= MAX_BYTES
    assert decode(data) == button


@given(st.one_of(st.none(), st.text(max_size=100), st.binary(max_size=80).map(lambda b: b.decode("latin-1"))))
def test_garbage_never_raises_and_only_canonical_data_decodes(data: str | None) -> None:
    button = decode(data)
    if button is not None:
        assert encode(button) == data


@pytest.mark.parametrize(
    "data",
    [
        "",
        "garbage",
        "ag1:ap:",
        "ag1:ap:abc\n",  # a trailing newline is not part of an opaque id
        "ag1:zz:abc",
        "ag2:ap:abc",
        "ag1:ap:abc:def",
        "ag1:ap:a b",
        "ag1:ap:" + "a" * 41,
        "ag1:ap:ünïcode",
    ],
)
def test_malformed_data_is_rejected(data: str) -> None:
    assert decode(data) is None


@pytest.mark.parametrize("arg", ["", "a b", "x" * 41, "a:b", "abc\n", "../etc"])
def test_encode_refuses_arguments_that_are_not_opaque_ids(arg: str) -> None:
    with pytest.raises(ValueError, match="opaque-safe"):
        encode(Button(ButtonAction.APPROVE, arg))
