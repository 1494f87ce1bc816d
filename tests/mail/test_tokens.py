"""Unsubscribe tokens: round trip, tampering, other keys and lists, and where the key comes from."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from pydantic import SecretStr

from newsletter.config.settings import Settings, load_settings
from newsletter.errors import ConfigError, LinkExpiredError, TokenError
from newsletter.mail.tokens import (
    LinkTarget,
    Purpose,
    key_id,
    sign,
    sign_link,
    signing_key,
    verify,
    verify_link,
)
from support.site import first_format_token

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


def test_the_token_does_not_show_the_address_or_the_list() -> None:
    # issue 13: the payload was the list and address in base64; a forwarded link showed both.
    token = sign(SECRET, "main", "li.lei@example.com")
    assert len(token.split(".")) == 2
    for part in token.split("."):
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        assert b"li.lei" not in decoded
        assert b"example.com" not in decoded
        assert b"main" not in decoded


def test_tokens_of_links_already_sent_still_verify() -> None:
    old = first_format_token(SECRET, "main", "li.lei@example.com")
    assert verify(SECRET, old) == ("main", "li.lei@example.com")


def test_a_first_format_payload_moved_to_another_address_fails() -> None:
    kid, _, mac = first_format_token(SECRET, "main", "victim@example.com").split(".")
    forged_payload = base64.urlsafe_b64encode(b"main\nother@example.com").decode().rstrip("=")
    with pytest.raises(TokenError, match="forged or was altered"):
        verify(SECRET, f"{kid}.{forged_payload}.{mac}")


def test_a_box_moved_under_another_key_id_fails() -> None:
    other = "another-secret-0123456789abcdef"
    _, box = sign(other, "main", "a@example.com").split(".")
    with pytest.raises(TokenError, match="forged or was altered"):
        verify(SECRET, f"{key_id(SECRET)}.{box}")


def test_previous_secrets_still_verify_after_a_rotation() -> None:
    # issue 13: rotating NEWSLETTER_SECRET made every link already sent answer 403.
    new = "the-new-secret-0123456789abcdef"
    before = [
        sign(SECRET, "main", "a@example.com"),
        first_format_token(SECRET, "main", "a@example.com"),
    ]
    for token in before:
        assert verify([new, SECRET], token) == ("main", "a@example.com")
        with pytest.raises(TokenError, match="NEWSLETTER_SECRET_PREVIOUS"):
            verify([new], token)
    assert verify([new, SECRET], sign(new, "main", "b@example.com")) == ("main", "b@example.com")


def test_previous_secrets_come_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "newsletter.toml").write_text("")
    settings = load_settings(
        tmp_path / "newsletter.toml",
        environ={
            "NEWSLETTER_SECRET": "the-new-secret-0123456789abcdef",
            "NEWSLETTER_SECRET_PREVIOUS": f"{SECRET}, older-secret-0123456789abc",
        },
    )
    key = signing_key(settings, allow_ephemeral=False)
    assert key.verifying == (
        b"the-new-secret-0123456789abcdef",
        SECRET.encode(),
        b"older-secret-0123456789abc",
    )
    assert SECRET not in repr(settings)
    short = settings.model_copy(update={"secret_previous": SecretStr("short")})
    with pytest.raises(ConfigError, match="NEWSLETTER_SECRET_PREVIOUS is too short"):
        signing_key(short, allow_ephemeral=False)


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
    with pytest.raises(TokenError, match="forged"):
        verify(SECRET, f"{kid}.{'A' * 40}")


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


# -- link tokens (the site's own mail) --------------------------------------------------------


def _link(purpose: Purpose = Purpose.CONFIRM, expires: int = 2_000_000_000) -> LinkTarget:
    return LinkTarget(purpose, "main", "ann@example.org", "nonce-1", expires, "")


def test_a_link_token_round_trips_and_shows_nothing() -> None:
    token = sign_link(SECRET, _link())
    assert "ann" not in token
    assert "main" not in token
    assert verify_link([SECRET + "-new", SECRET], token, Purpose.CONFIRM, 1.0) == _link()


def test_a_link_token_is_single_purpose() -> None:
    confirm = sign_link(SECRET, _link())
    with pytest.raises(TokenError, match="forged, altered or for something else"):
        verify_link(SECRET, confirm, Purpose.CHANGE, 1.0)
    with pytest.raises(TokenError):
        verify(SECRET, confirm)  # nor an unsubscribe token
    with pytest.raises(TokenError):
        verify_link(SECRET, sign(SECRET, "main", "ann@example.org"), Purpose.CONFIRM, 1.0)


def test_a_link_token_expires() -> None:
    token = sign_link(SECRET, _link(expires=1000))
    assert verify_link(SECRET, token, Purpose.CONFIRM, 1000.0).expires_at == 1000
    with pytest.raises(LinkExpiredError, match="expired"):
        verify_link(SECRET, token, Purpose.CONFIRM, 1000.5)


@pytest.mark.parametrize("position", [0, 9, 20, -1])
def test_an_altered_link_token_fails(position: int) -> None:
    token = sign_link(SECRET, _link())
    swapped = "A" if token[position] != "A" else "B"
    with pytest.raises(TokenError):
        verify_link(
            SECRET, token[:position] + swapped + token[position + 1 :], Purpose.CONFIRM, 1.0
        )


def test_link_fields_may_not_hold_a_newline() -> None:
    with pytest.raises(ValueError, match="newline"):
        sign_link(SECRET, _link()._replace(nonce="a\nb"))
