"""The keys NEWSLETTER_SECRET gives, and unsubscribe tokens: (list name, address) in, an opaque
URL-safe token out, and back again.

Every token of the tool (these, the click tokens of mail/clicktokens.py) comes from this module's
keys: the secret and its rotation, one derived key per purpose, so no kind of token verifies as
another.

An unsubscribe token is two base64url fields joined by a dot, ``KID.BOX``:

* ``KID``  6 bytes of HMAC(key, "key id"): names the key without revealing it, so a token made
           with a key that is no longer configured fails with a clear reason, not as "forged".
* ``BOX``  the list name and address (UTF-8, a newline between), encrypted and authenticated
           with AES-SIV under a key derived from the secret, with the version and KID as
           associated data. A forwarded link shows no address; a token cannot be forged without
           the key, nor moved to another list or address. AES-SIV is deterministic: the same
           reader gets the same token in every message (and on every retry).

Links already sent carry the first format, ``KID.PAYLOAD.MAC`` (list and address in plain
base64, HMAC-SHA256): they still verify. Rotating NEWSLETTER_SECRET: put the old value in
NEWSLETTER_SECRET_PREVIOUS (comma-separated, several allowed); tokens made with any of them keep
working, new ones are made with the new secret.

The token sits in a URL path that mailbox providers POST to without cookies (RFC 8058), so it alone
must prove the request.

Links in the site's own mail (a signup's confirmation, an address change's) carry a link token,
``KID.BOX`` too, under a key of their own: the purpose, the list, the address, the nonce the
database keeps for that link, any detail (a change's old address) and an expiry, encrypted and
authenticated with the purpose as associated data. It is single-purpose (a confirmation link
never verifies as a change, nor either as an unsubscribe token) and expires (`[signup]
confirm_expiry`); the nonce makes it single-use where the database forgets it once used.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from newsletter.config.configfile import MIN_SECRET_LENGTH, SECRET_ENV, SECRET_FILE
from newsletter.config.settings import Settings
from newsletter.errors import LinkExpiredError, SecretError, TokenError

_VERSION = b"newsletter-unsubscribe-v2"
_VERSION_1 = b"newsletter-unsubscribe-v1\n"
_KID_LABEL = b"newsletter key id"
_BOX_LABEL = b"newsletter unsubscribe token encryption v2"
_MAX_TOKEN = 2048
_FIELD = re.compile(r"[A-Za-z0-9_-]+")

Secret = bytes | str


class SigningKey(NamedTuple):
    """The key tokens are made with; `ephemeral` when it lives only in this process;
    `previous` the keys of earlier secrets, which only verify."""

    secret: bytes
    ephemeral: bool
    previous: tuple[bytes, ...] = ()

    @property
    def verifying(self) -> tuple[bytes, ...]:
        """Every key a token may have been made with, the current one first."""
        return (self.secret, *self.previous)


def signing_key(settings: Settings, *, allow_ephemeral: bool) -> SigningKey:
    """NEWSLETTER_SECRET as a key; without it, a per-process random key if `allow_ephemeral`.

    Real sends pass ``allow_ephemeral=False``: links signed with a key that dies with the process
    could never be verified by the unsubscribe endpoint. Builds, previews and dry runs may use the
    ephemeral key (say so in one line: their links will not work).
    """
    var = SECRET_ENV["secret"]
    previous = _previous(settings)
    if settings.secret is not None:
        value = _long_enough(settings.secret.get_secret_value(), var)
        return SigningKey(value.encode("utf-8"), ephemeral=False, previous=previous)
    if not allow_ephemeral:
        raise SecretError(
            f"{var} is not set, and the project has no {SECRET_FILE}: unsubscribe links cannot"
            " be signed for a real send"
        )
    return SigningKey(_ephemeral_secret(), ephemeral=True, previous=previous)


def _previous(settings: Settings) -> tuple[bytes, ...]:
    if settings.secret_previous is None:
        return ()
    var = SECRET_ENV["secret_previous"]
    values = settings.secret_previous.get_secret_value().split(",")
    return tuple(_long_enough(v.strip(), var).encode("utf-8") for v in values if v.strip())


def _long_enough(value: str, var: str) -> str:
    if len(value) < MIN_SECRET_LENGTH:
        # A previous secret is an old value kept for the links already out, never a new one.
        previous = f"{var} lists the earlier secrets, comma-separated, each as it was set."
        raise SecretError(
            f"{var} is too short ({len(value)} characters; at least {MIN_SECRET_LENGTH})",
            hint=None if var == SECRET_ENV["secret"] else previous,
        )
    return value


@functools.cache
def _ephemeral_secret() -> bytes:
    # One random key per process, so everything one run signs verifies within that run.
    return secrets.token_bytes(32)


@functools.lru_cache(maxsize=8)  # a send signs one token per recipient with the same key
def key_id(secret: Secret) -> str:
    """The short public name of a key, as it appears at the start of every token."""
    return b64(key_id_bytes(secret))


@functools.lru_cache(maxsize=8)
def key_id_bytes(secret: Secret) -> bytes:
    """The 6 bytes `key_id` spells; a token may carry a prefix of them."""
    return hmac.digest(_key(secret), _KID_LABEL, "sha256")[:6]


@functools.lru_cache(maxsize=16)
def siv_box(secret: Secret, label: bytes = _BOX_LABEL) -> AESSIV:
    """AES-256-SIV under the key derived from `secret` for the purpose `label`."""
    # AES-256-SIV takes a 512-bit key; the secret itself is never used as one, and each purpose
    # (its label) gets a key of its own.
    return AESSIV(hmac.digest(_key(secret), label, hashlib.sha512))


@functools.lru_cache(maxsize=16)
def derived_key(secret: Secret, label: bytes) -> bytes:
    """A 256-bit key derived from `secret` for the purpose `label` (never the secret itself)."""
    return hmac.digest(_key(secret), label, hashlib.sha256)


_HEALTH_LABEL = b"newsletter health probe v1"
# A probe is a short random word (`newsletter doctor` sends 22 base64url characters); anything
# longer or in other characters gets no proof, so the endpoint signs nothing a stranger chose
# at length.
_PROBE = re.compile(r"[A-Za-z0-9_-]{16,64}")


def health_proof(secret: Secret, probe: str) -> str | None:
    """What serve answers to `GET /healthz?probe=PROBE`: a MAC of the probe under a key derived
    from the secret (never the secret, nor a token of any use elsewhere), so `newsletter doctor`
    proves that the serve at base_url runs with its project's secret. None for a malformed probe."""
    if not _PROBE.fullmatch(probe):
        return None
    return b64(hmac.digest(derived_key(secret, _HEALTH_LABEL), probe.encode(), hashlib.sha256))


def sign(secret: Secret, list_name: str, address: str) -> str:
    """An opaque token that proves `address` may be unsubscribed from `list_name`."""
    if "\n" in list_name or "\n" in address:
        raise ValueError("list name and address must not contain a newline")
    kid = key_id(secret)
    box = siv_box(secret).encrypt(f"{list_name}\n{address}".encode(), [_VERSION, kid.encode()])
    return f"{kid}.{b64(box)}"


def verify(keys: Secret | Sequence[Secret], token: str) -> tuple[str, str]:
    """The (list name, address) a token was made for, with any of `keys` (the current secret
    first, then earlier ones); TokenError if it is not genuine."""
    if len(token) > _MAX_TOKEN or not token.isascii():
        raise TokenError("the unsubscribe token is malformed")
    parts = token.split(".")
    if len(parts) not in (2, 3) or not all(canonical(part) for part in parts):
        raise TokenError("the unsubscribe token is malformed")
    candidates = (keys,) if isinstance(keys, bytes | str) else tuple(keys)
    secret = next((k for k in candidates if hmac.compare_digest(parts[0], key_id(k))), None)
    if secret is None:
        raise TokenError(
            "the unsubscribe token was made with another key (was NEWSLETTER_SECRET changed? "
            "keep the old value in NEWSLETTER_SECRET_PREVIOUS)"
        )
    try:
        if len(parts) == 2:
            kid, box = parts
            plain = siv_box(secret).decrypt(unb64(box), [_VERSION, kid.encode()])
        else:
            plain = _verify_v1(secret, *parts)
        list_name, sep, address = plain.decode("utf-8").partition("\n")
    except InvalidTag:
        raise TokenError("the unsubscribe token is forged or was altered") from None
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise TokenError("the unsubscribe token is malformed") from None
    if not sep or not list_name or not address:
        raise TokenError("the unsubscribe token is malformed")
    return list_name, address


class Purpose(StrEnum):
    """What a link token may do; each verifies only as itself."""

    CONFIRM = "confirm"  # confirm a signup
    CHANGE = "change"  # confirm a new address from the preference page


_LINK_VERSION = b"newsletter-link-v1"
_LINK_LABEL = b"newsletter link token encryption v1"


class LinkTarget(NamedTuple):
    """What a genuine link token names."""

    purpose: Purpose
    list_name: str
    address: str  # the address key the link acts for (a change: the new address)
    nonce: str
    expires_at: int  # Unix seconds
    detail: str = ""  # a change: the old address key


def sign_link(secret: Secret, target: LinkTarget) -> str:
    """An opaque token for `target` (no field may hold a newline)."""
    fields = [target.list_name, target.address, target.nonce, target.detail]
    if any("\n" in f for f in fields):
        raise ValueError("a link token's fields must not contain a newline")
    kid = key_id(secret)
    plain = "\n".join([*fields, str(int(target.expires_at))]).encode()
    box = siv_box(secret, _LINK_LABEL).encrypt(plain, _link_data(kid, target.purpose))
    return f"{kid}.{b64(box)}"


def verify_link(
    keys: Secret | Sequence[Secret], token: str, purpose: Purpose, now: float
) -> LinkTarget:
    """The target of a link token made for `purpose` with any of `keys`; TokenError if it is
    not genuine (or for another purpose), LinkExpiredError once it is past its expiry."""
    parts = token.split(".")
    if len(token) > _MAX_TOKEN or len(parts) != 2 or not all(canonical(p) for p in parts):
        raise TokenError("the link is malformed")
    candidates = (keys,) if isinstance(keys, bytes | str) else tuple(keys)
    secret = next((k for k in candidates if hmac.compare_digest(parts[0], key_id(k))), None)
    if secret is None:
        raise TokenError("the link was made with another key (was NEWSLETTER_SECRET changed?)")
    try:
        plain = siv_box(secret, _LINK_LABEL).decrypt(unb64(parts[1]), _link_data(parts[0], purpose))
        list_name, address, nonce, detail, expires = plain.decode("utf-8").split("\n")
        expires_at = int(expires)
    except InvalidTag:
        raise TokenError("the link is forged, altered or for something else") from None
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise TokenError("the link is malformed") from None
    if expires_at < now:
        raise LinkExpiredError("the link has expired")
    return LinkTarget(purpose, list_name, address, nonce, expires_at, detail)


def _link_data(kid: str, purpose: Purpose) -> list[bytes]:
    return [_LINK_VERSION, kid.encode(), purpose.value.encode()]


def _verify_v1(secret: Secret, kid: str, payload: str, mac: str) -> bytes:
    """The first format's payload, if its MAC is right (links in issues sent before v2)."""
    message = _VERSION_1 + kid.encode("ascii") + b"." + payload.encode("ascii")
    if not hmac.compare_digest(mac, b64(hmac.digest(_key(secret), message, "sha256"))):
        raise InvalidTag
    return unb64(payload)


def canonical(field: str) -> bool:
    """Only the exact encoding _b64 writes: no padding, no characters base64 would skip, and no
    other spelling of the same bytes (the last character's unused bits set)."""
    if not _FIELD.fullmatch(field) or len(field) % 4 == 1:
        return False
    return b64(unb64(field)) == field


def _key(secret: Secret) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def b64(data: bytes) -> str:
    """URL-safe base64 without padding: the spelling of every token field."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    """The bytes of a field `canonical` accepted."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
