"""Opaque URL-safe tokens, made and checked under NEWSLETTER_SECRET: unsubscribe and click.

An unsubscribe token carries (list name, address) and back again; a click token carries a link's
place in an issue (see "Click tokens" below). Both come from the same secret and its rotation,
under keys derived for each purpose, so one never verifies as the other.

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

Click tokens go in every tracked link of every message, so they are one base64url field, about
40 characters: 3 bytes of the same key id, then an AES-SIV box (its own derived key, its own
associated data) of the issue number, the link's Place, 4 bytes of SHA-256 of the link's URL (so
a redirect can tell that the issue file was edited since), and either the list name
(`aggregate`: the same token for every reader of the list, nothing per person) or the outbox row
(`per-reader`). Numbers are unsigned LEB128 varints.
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
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from newsletter.configfile import SECRET_ENV
from newsletter.errors import ConfigError, TokenError
from newsletter.places import Place, Region
from newsletter.settings import Settings

_VERSION = b"newsletter-unsubscribe-v2"
_VERSION_1 = b"newsletter-unsubscribe-v1\n"
_KID_LABEL = b"newsletter key id"
_BOX_LABEL = b"newsletter unsubscribe token encryption v2"
_MAX_TOKEN = 2048
_CLICK_VERSION = b"newsletter-click-v1"
_CLICK_BOX_LABEL = b"newsletter click token encryption v1"
_CLICK_KID = 3  # bytes of the key id: enough to pick among a few keys, a collision tries both
_DIGEST = 4  # bytes of the URL's SHA-256
_SIV_TAG = 16
_MAX_CLICK = 256
_MAX_VARINT = 9  # bytes: 63 bits
_CLICK_HINT = "Use the link exactly as it came in the email."
MIN_SECRET_LENGTH = 16
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
        raise ConfigError(
            f"{var} is not set: unsubscribe links cannot be signed for a real send",
            hint=f"Set {var} in the environment to a long random value, kept the same for every "
            "send (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`).",
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
        raise ConfigError(
            f"{var} is too short ({len(value)} characters; at least {MIN_SECRET_LENGTH})",
            hint=f"Set {var} to a long random value, for example the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`.",
        )
    return value


@functools.cache
def _ephemeral_secret() -> bytes:
    # One random key per process, so everything one run signs verifies within that run.
    return secrets.token_bytes(32)


@functools.lru_cache(maxsize=8)  # a send signs one token per recipient with the same key
def key_id(secret: Secret) -> str:
    """The short public name of a key, as it appears at the start of every token."""
    return _b64(_key_id_bytes(secret))


@functools.lru_cache(maxsize=8)
def _key_id_bytes(secret: Secret) -> bytes:
    return hmac.digest(_key(secret), _KID_LABEL, "sha256")[:6]


@functools.lru_cache(maxsize=16)
def _box(secret: Secret, label: bytes = _BOX_LABEL) -> AESSIV:
    # AES-256-SIV takes a 512-bit key; the secret itself is never used as one, and each purpose
    # (its label) gets a key of its own.
    return AESSIV(hmac.digest(_key(secret), label, hashlib.sha512))


def sign(secret: Secret, list_name: str, address: str) -> str:
    """An opaque token that proves `address` may be unsubscribed from `list_name`."""
    if "\n" in list_name or "\n" in address:
        raise ValueError("list name and address must not contain a newline")
    kid = key_id(secret)
    box = _box(secret).encrypt(f"{list_name}\n{address}".encode(), [_VERSION, kid.encode()])
    return f"{kid}.{_b64(box)}"


def verify(keys: Secret | Sequence[Secret], token: str) -> tuple[str, str]:
    """The (list name, address) a token was made for, with any of `keys` (the current secret
    first, then earlier ones); TokenError if it is not genuine."""
    if len(token) > _MAX_TOKEN or not token.isascii():
        raise TokenError("the unsubscribe token is malformed")
    parts = token.split(".")
    if len(parts) not in (2, 3) or not all(_canonical(part) for part in parts):
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
            plain = _box(secret).decrypt(_unb64(box), [_VERSION, kid.encode()])
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


def _verify_v1(secret: Secret, kid: str, payload: str, mac: str) -> bytes:
    """The first format's payload, if its MAC is right (links in issues sent before v2)."""
    message = _VERSION_1 + kid.encode("ascii") + b"." + payload.encode("ascii")
    if not hmac.compare_digest(mac, _b64(hmac.digest(_key(secret), message, "sha256"))):
        raise InvalidTag
    return _unb64(payload)


class ClickTarget(NamedTuple):
    """What a genuine click token names: the issue, the link's place in it, a digest of the
    link's URL when the token was made, and the list (`aggregate`) or the outbox row
    (`per-reader`): exactly one of the two."""

    issue: int
    place: Place
    digest: bytes
    list_name: str | None
    row: int | None

    def names(self, url: str) -> bool:
        """Whether `url` is the link the token was made for (the file may have changed)."""
        return hmac.compare_digest(self.digest, url_digest(url))


def url_digest(url: str) -> bytes:
    return hashlib.sha256(url.encode("utf-8")).digest()[:_DIGEST]


def click_token(
    secret: Secret,
    issue: int,
    place: Place,
    url: str,
    *,
    list_name: str | None = None,
    row: int | None = None,
) -> str:
    """An opaque token naming the link at `place` of `issue`, for one list's readers together
    (`list_name`) or for one outbox row (`row`). Deterministic: the same arguments give the
    same token, so an aggregate link is the same in every message."""
    if (list_name is None) == (row is None):
        raise ValueError("a click token names either a list (aggregate) or an outbox row")
    plain = bytearray()
    for number in (issue, place.region << 1 | (row is not None), place.section, place.item):
        _put_varint(plain, number)
    _put_varint(plain, place.link)
    plain += url_digest(url)
    if row is not None:
        _put_varint(plain, row)
    else:
        assert list_name is not None
        if not list_name:
            raise ValueError("the list name must not be empty")
        plain += list_name.encode("utf-8")
    kid = _key_id_bytes(secret)[:_CLICK_KID]
    box = _box(secret, _CLICK_BOX_LABEL).encrypt(bytes(plain), [_CLICK_VERSION, kid])
    return _b64(kid + box)


def verify_click(keys: Secret | Sequence[Secret], token: str) -> ClickTarget:
    """What a click token names, if it was made with any of `keys` (the current secret
    first); TokenError if it is forged, altered, malformed or made with an unknown key."""
    if len(token) > _MAX_CLICK or not token.isascii() or not _canonical(token):
        raise TokenError("the link's token is malformed", hint=_CLICK_HINT)
    raw = _unb64(token)
    if len(raw) < _CLICK_KID + _SIV_TAG + 5 + _DIGEST:
        raise TokenError("the link's token is malformed", hint=_CLICK_HINT)
    kid, box = raw[:_CLICK_KID], raw[_CLICK_KID:]
    candidates = (keys,) if isinstance(keys, bytes | str) else tuple(keys)
    matching = [k for k in candidates if hmac.compare_digest(_key_id_bytes(k)[:_CLICK_KID], kid)]
    if not matching:
        raise TokenError(
            "the link's token was made with another key (was NEWSLETTER_SECRET changed? keep "
            "the old value in NEWSLETTER_SECRET_PREVIOUS)",
            hint=_CLICK_HINT,
        )
    for secret in matching:
        try:
            plain = _box(secret, _CLICK_BOX_LABEL).decrypt(box, [_CLICK_VERSION, kid])
        except InvalidTag:
            continue
        try:
            return _click_target(plain)
        except (ValueError, UnicodeDecodeError):
            break
    else:
        raise TokenError("the link's token is forged or was altered", hint=_CLICK_HINT)
    raise TokenError("the link's token is malformed", hint=_CLICK_HINT)


def _click_target(plain: bytes) -> ClickTarget:
    at = 0
    numbers = []
    for _ in range(5):
        number, at = _get_varint(plain, at)
        numbers.append(number)
    issue, flags, section, item, link = numbers
    place = Place(Region(flags >> 1), section, item, link)
    digest, at = plain[at : at + _DIGEST], at + _DIGEST
    if len(digest) != _DIGEST:
        raise ValueError("short")
    if flags & 1:
        row, at = _get_varint(plain, at)
        if at != len(plain):
            raise ValueError("trailing bytes")
        return ClickTarget(issue, place, digest, None, row)
    list_name = plain[at:].decode("utf-8")
    if not list_name:
        raise ValueError("no list")
    return ClickTarget(issue, place, digest, list_name, None)


def _put_varint(out: bytearray, number: int) -> None:
    if number < 0 or number >= 1 << (7 * _MAX_VARINT):
        raise ValueError(f"{number} is out of a token's range")
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)


def _get_varint(data: bytes, at: int) -> tuple[int, int]:
    number = shift = 0
    for index in range(at, min(at + _MAX_VARINT, len(data))):
        byte = data[index]
        number |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return number, index + 1
        shift += 7
    raise ValueError("bad number")


def _canonical(field: str) -> bool:
    """Only the exact encoding _b64 writes: no padding, no characters base64 would skip, and no
    other spelling of the same bytes (the last character's unused bits set)."""
    if not _FIELD.fullmatch(field) or len(field) % 4 == 1:
        return False
    return _b64(_unb64(field)) == field


def _key(secret: Secret) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
