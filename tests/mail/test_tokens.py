"""Unsubscribe tokens: round trip, tampering, other keys and lists, and where the key comes from."""

from __future__ import annotations

import base64

import pytest
from pydantic import SecretStr

from newsletter.errors import ConfigError, TokenError
from newsletter.mail.tokens import key_id, sign, signing_key, verify
from newsletter.settings import Settings

SECRET = "s3cret-for-tests-only-0123456789"


def test_round_trip_returns_list_and_address() -> None:
    token = sign(SECRET, "main", "li.lei@example.com")
    assert verify(SECRET, token) == ("main", "li.lei@example.com")


def test_token_is_url_safe_and_names_its_key() -> None:
    token = sign(SECRET, "staging", "carol@xn--fsqu00a.xn--55qx5d")
    assert all(c.isalnum() or c in "-_." for c in token)
    assert token.split(".")[0] == key_id(SECRET)
    assert key_id(SECRET) != key_id(SECRET + "x")


def test_signing_is_deterministic_and_differs_per_list_and_address() -> None:
    a = sign(SECRET, "main", "a@example.com")
    assert a == sign(SECRET, "main", "a@example.com")
    assert a != sign(SECRET, "staging", "a@example.com")
    assert a != sign(SECRET, "main", "b@example.com")


@pytest.mark.parametrize("position", [0, 9, 20, -1])
def test_any_altered_character_fails(position: int) -> None:
    token = sign(SECRET, "main", "a@example.com")
    char = token[position]
    altered = token[:position] + ("A" if char != "A" else "B") + token[position + 1 :]
    if position == -1:
        altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(TokenError):
        verify(SECRET, altered)


def test_payload_moved_to_another_address_fails() -> None:
    kid, _, mac = sign(SECRET, "main", "victim@example.com").split(".")
    forged_payload = base64.urlsafe_b64encode(b"main\nother@example.com").decode().rstrip("=")
    with pytest.raises(TokenError, match="forged or was altered"):
        verify(SECRET, f"{kid}.{forged_payload}.{mac}")


def test_token_of_another_list_is_not_accepted_for_this_one() -> None:
    staging = sign(SECRET, "staging", "a@example.com")
    assert verify(SECRET, staging)[0] == "staging"


def test_other_key_is_reported_as_such() -> None:
    token = sign("another-secret-0123456789abcdef", "main", "a@example.com")
    with pytest.raises(TokenError, match="another key"):
        verify(SECRET, token)


@pytest.mark.parametrize("token", ["", "abc", "a.b", "a.b.c.d", "..", "é.é.é", "x" * 5000])
def test_malformed_tokens_fail_cleanly(token: str) -> None:
    with pytest.raises(TokenError):
        verify(SECRET, token)


def test_forging_with_the_right_key_id_but_no_key_fails() -> None:
    kid = key_id(SECRET)
    payload = base64.urlsafe_b64encode(b"main\na@example.com").decode().rstrip("=")
    with pytest.raises(TokenError, match="forged"):
        verify(SECRET, f"{kid}.{payload}.{'A' * 43}")


def test_signing_key_from_settings() -> None:
    key = signing_key(Settings(secret=SecretStr(SECRET)), allow_ephemeral=False)
    assert key.secret == SECRET.encode()
    assert not key.ephemeral


def test_real_send_without_secret_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="NEWSLETTER_SECRET is not set"):
        signing_key(Settings(), allow_ephemeral=False)


def test_short_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="too short"):
        signing_key(Settings(secret=SecretStr("short")), allow_ephemeral=True)


def test_ephemeral_key_is_random_but_stable_within_the_process() -> None:
    first = signing_key(Settings(), allow_ephemeral=True)
    second = signing_key(Settings(), allow_ephemeral=True)
    assert first.ephemeral
    assert first.secret == second.secret
    assert len(first.secret) == 32
    token = sign(first.secret, "main", "a@example.com")
    assert verify(second.secret, token) == ("main", "a@example.com")
