"""Unsubscribe tokens: (list name, address) in, a signed URL-safe token out, and back again.

A token is three base64url fields joined by dots, ``KID.PAYLOAD.MAC``:

* ``KID``     6 bytes of HMAC(key, "key id"): names the key without revealing it, so a token signed
              before NEWSLETTER_SECRET was rotated fails with a clear reason instead of "forged".
* ``PAYLOAD`` the UTF-8 list name and address, separated by a newline.
* ``MAC``     HMAC-SHA256(key, version + KID + PAYLOAD), compared in constant time.

The token sits in a URL path that mailbox providers POST to without cookies (RFC 8058), so it alone
must prove the request: it cannot be forged without the key, nor moved to another list or address.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import secrets
from typing import NamedTuple

from newsletter.errors import ConfigError, TokenError
from newsletter.settings import SECRET_ENV, Settings

_VERSION = b"newsletter-unsubscribe-v1\n"
_KID_LABEL = b"newsletter key id"
_MAX_TOKEN = 2048
MIN_SECRET_LENGTH = 16


class SigningKey(NamedTuple):
    """The key tokens are signed with; `ephemeral` when it lives only in this process."""

    secret: bytes
    ephemeral: bool


def signing_key(settings: Settings, *, allow_ephemeral: bool) -> SigningKey:
    """NEWSLETTER_SECRET as a key; without it, a per-process random key if `allow_ephemeral`.

    Real sends pass ``allow_ephemeral=False``: links signed with a key that dies with the process
    could never be verified by the unsubscribe endpoint. Builds, previews and dry runs may use the
    ephemeral key (say so in one line: their links will not work).
    """
    var = SECRET_ENV["secret"]
    if settings.secret is not None:
        value = settings.secret.get_secret_value()
        if len(value) < MIN_SECRET_LENGTH:
            raise ConfigError(
                f"{var} is too short ({len(value)} characters; at least {MIN_SECRET_LENGTH})",
                hint=f"Set {var} to a long random value, for example the output of "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`.",
            )
        return SigningKey(value.encode("utf-8"), ephemeral=False)
    if not allow_ephemeral:
        raise ConfigError(
            f"{var} is not set: unsubscribe links cannot be signed for a real send",
            hint=f"Set {var} in the environment to a long random value, kept the same for every "
            "send (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`).",
        )
    return SigningKey(_ephemeral_secret(), ephemeral=True)


@functools.cache
def _ephemeral_secret() -> bytes:
    # One random key per process, so everything one run signs verifies within that run.
    return secrets.token_bytes(32)


@functools.lru_cache(maxsize=8)  # a send signs one token per recipient with the same key
def key_id(secret: bytes | str) -> str:
    """The short public name of a key, as it appears at the start of every token."""
    return _b64(hmac.digest(_key(secret), _KID_LABEL, "sha256")[:6])


def sign(secret: bytes | str, list_name: str, address: str) -> str:
    """A token that proves `address` may be unsubscribed from `list_name`."""
    if "\n" in list_name or "\n" in address:
        raise ValueError("list name and address must not contain a newline")
    kid = key_id(secret)
    payload = _b64(f"{list_name}\n{address}".encode())
    return f"{kid}.{payload}.{_mac(secret, kid, payload)}"


def verify(secret: bytes | str, token: str) -> tuple[str, str]:
    """The (list name, address) a token was signed for; TokenError if it is not genuine."""
    if len(token) > _MAX_TOKEN or not token.isascii():
        raise TokenError("the unsubscribe token is malformed")
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise TokenError("the unsubscribe token is malformed")
    kid, payload, mac = parts
    if not hmac.compare_digest(kid, key_id(secret)):
        raise TokenError(
            "the unsubscribe token was signed with another key (was NEWSLETTER_SECRET changed?)"
        )
    if not hmac.compare_digest(mac, _mac(secret, kid, payload)):
        raise TokenError("the unsubscribe token is forged or was altered")
    try:
        list_name, sep, address = _unb64(payload).decode("utf-8").partition("\n")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise TokenError("the unsubscribe token is malformed") from None
    if not sep or not list_name or not address:
        raise TokenError("the unsubscribe token is malformed")
    return list_name, address


def _key(secret: bytes | str) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def _mac(secret: bytes | str, kid: str, payload: str) -> str:
    message = _VERSION + kid.encode("ascii") + b"." + payload.encode("ascii")
    return _b64(hmac.digest(_key(secret), message, "sha256"))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
