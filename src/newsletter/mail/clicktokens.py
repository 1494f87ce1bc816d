"""Click tokens: an issue, a link's place in it, and a list or an outbox row in; an opaque token
for the link's `BASE/r/TOKEN` out, and back again.

A token names a place, never a URL, so the redirect can only lead where the issue links. Keys are
mail/tokens.py's: derived from NEWSLETTER_SECRET for click tokens alone (an unsubscribe token never
verifies as one, nor one as an unsubscribe token), and tokens made under a secret now in
NEWSLETTER_SECRET_PREVIOUS keep working. Two spellings, told apart by length:

* **A row token** (`per-reader`; 24 characters): 2 bytes of the key id, then one AES-256 block
  holding a version and the region (one byte), the issue (two), section, item and link (one
  each), the outbox row (a varint of at most four bytes) and zeros to the end, at least six.
  Each block is enciphered on its own (a strong pseudorandom permutation of one block), so a
  forged or altered block deciphers to noise and its zeros hold by chance once in 2^48
  ("encode-then-encipher", Bellare and Rogaway 2000). One AES call makes every token of a
  message at once: a message with 30 links costs a few microseconds, not 30 AEAD calls.
* **A box token** (`aggregate`, and any place or row too large for a block; about 43
  characters): 3 bytes of the key id, then an AES-SIV box of the issue, the place and 4 bytes of
  SHA-256 of the link's URL (so the redirect can tell that the file was edited since), then the
  list name (`aggregate`: every reader of the list gets the same token) or the row.

Numbers in a box are unsigned LEB128 varints. Both spellings are deterministic: the same link of
the same message gets the same token on every retry.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
import struct
from collections.abc import Sequence
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from newsletter.errors import TokenError
from newsletter.mail.tokens import (
    Secret,
    b64,
    canonical,
    derived_key,
    key_id_bytes,
    siv_box,
    unb64,
)
from newsletter.rendering.places import Place, Region

_BOX_LABEL = b"newsletter click token encryption v1"
_BLOCK_LABEL = b"newsletter click token block v1"
_BOX_KID = 3  # bytes of the key id: enough to pick among a few keys; a collision tries both
_BLOCK_KID = 2
_BLOCK_VERSION = 1
_BLOCK = 16
BLOCK_TOKEN = 24  # characters: (2 + 16) bytes in base64, no padding
_ROW_AT, _ROW_MAX = 6, 4  # a block's row: from byte 6, a varint of at most 4 bytes
MAX_BLOCK_ROW = (1 << 7 * _ROW_MAX) - 1  # the last row whose tokens are blocks
_DIGEST = 4  # bytes of the URL's SHA-256
_SIV_TAG = 16
_MAX_TOKEN = 256
_MAX_VARINT = 9  # bytes: 63 bits
_HINT = "Use the link exactly as it came in the email."
_URL_SAFE = bytes.maketrans(b"+/", b"-_")
_ZEROS = [bytes(_BLOCK - _ROW_AT - n) for n in range(_ROW_MAX + 1)]  # after a row of n bytes


class ClickTarget(NamedTuple):
    """What a genuine click token names: the issue, the link's place in it, and the list
    (`aggregate`) or the outbox row (`per-reader`), exactly one of the two. `digest` is 4 bytes
    of the link URL's SHA-256 when the token was made (box tokens), or b"" (row tokens)."""

    issue: int
    place: Place
    digest: bytes
    list_name: str | None
    row: int | None

    def names(self, url: str) -> bool | None:
        """Whether `url` is the link the token was made for; None when the token cannot tell."""
        if not self.digest:
            return None
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
    """The token of one link, for one list's readers together (`list_name`) or for one
    outbox row (`row`)."""
    if (list_name is None) == (row is None):
        raise ValueError("a click token names either a list (aggregate) or an outbox row")
    tokens = LinkTokens(secret, issue, [(place, url)])
    return tokens.for_row(row)[0] if row is not None else tokens.for_list(str(list_name))[0]


class LinkTokens:
    """The click tokens of one issue's links, in the order given, with what is the same for
    every reader worked out once: a message's tokens are then one AES call."""

    def __init__(self, secret: Secret, issue: int, links: Sequence[tuple[Place, str]]) -> None:
        self._secret = secret
        self._issue = issue
        self._links = list(links)
        self._box_kid = key_id_bytes(secret)[:_BOX_KID]
        self._block_kid = key_id_bytes(secret)[:_BLOCK_KID]
        self._heads = [_box_head(issue, place, url, row=False) for place, url in links]
        self._row_heads = [_box_head(issue, place, url, row=True) for place, url in links]
        blocks = [_block_head(issue, place) for place, _ in links]
        self._blocks = [head for head in blocks if head is not None]
        self._fits = len(self._blocks) == len(blocks)
        # One encryptor per object: ECB holds no state between blocks; a factory is one thread's.
        self._encipher = _block_cipher(secret).encryptor()
        # A message's blocks and tokens cut apart in one call each (a message is on the hot path).
        self._split_blocks = struct.Struct(f"{_BLOCK}s" * len(self._blocks)).unpack
        self._split_tokens = struct.Struct(f"{BLOCK_TOKEN}s" * len(self._blocks)).unpack

    @property
    def blocks(self) -> bool:
        """Whether every place fits a block: then a row's tokens (up to MAX_BLOCK_ROW) are
        BLOCK_TOKEN characters each."""
        return self._fits

    def for_list(self, list_name: str) -> list[str]:
        """`aggregate`: the tokens every reader of `list_name` gets."""
        if not list_name:
            raise ValueError("the list name must not be empty")
        tail = list_name.encode("utf-8")
        return [self._seal(head + tail) for head in self._heads]

    def for_row(self, row: int) -> list[str]:
        """`per-reader`: the tokens of the message of outbox row `row`."""
        return [token.decode("ascii") for token in self.row_bytes(row)]

    def row_bytes(self, row: int) -> Sequence[bytes]:
        """`for_row`'s tokens as ASCII bytes, as a message's body holds them."""
        if not self._links:
            return ()
        if self._fits and 0 <= row <= MAX_BLOCK_ROW:
            # Every block is head (6 bytes) + the row + zeros: the row's tail joins them all.
            number = _varint(row)
            tail = number + _ZEROS[len(number)]
            sealed = self._encipher.update(tail.join(self._blocks) + tail)
            kid = self._block_kid
            raw = kid + kid.join(self._split_blocks(sealed))
            # 18 bytes a token: its base64 is whole, with no padding, wherever it starts.
            text = binascii.b2a_base64(raw, newline=False).translate(_URL_SAFE)
            tokens: Sequence[bytes] = self._split_tokens(text)
            return tokens
        # A place or a row too large for a block: every token of the message is a box.
        number = _varint(row)
        return [self._seal(head + number).encode("ascii") for head in self._row_heads]

    def _seal(self, plain: bytes) -> str:
        # No associated data: the key is this purpose's alone, and the key id only picks it, so
        # an altered id fails like an altered box.
        return b64(self._box_kid + siv_box(self._secret, _BOX_LABEL).encrypt(plain, None))


def verify_click(keys: Secret | Sequence[Secret], token: str) -> ClickTarget:
    """What a click token names, if it was made with any of `keys` (the current secret
    first); TokenError if it is forged, altered, malformed or made with an unknown key."""
    if len(token) > _MAX_TOKEN or not token.isascii() or not canonical(token):
        raise TokenError("the link's token is malformed", hint=_HINT)
    raw = unb64(token)
    block = len(token) == BLOCK_TOKEN
    if not block and len(raw) < _BOX_KID + _SIV_TAG + 5 + _DIGEST:
        raise TokenError("the link's token is malformed", hint=_HINT)
    size = _BLOCK_KID if block else _BOX_KID
    kid, sealed = raw[:size], raw[size:]
    candidates = (keys,) if isinstance(keys, bytes | str) else tuple(keys)
    matching = [k for k in candidates if hmac.compare_digest(key_id_bytes(k)[:size], kid)]
    if not matching:
        raise TokenError(
            "the link's token was made with another key (was NEWSLETTER_SECRET changed? keep "
            "the old value in NEWSLETTER_SECRET_PREVIOUS)",
            hint=_HINT,
        )
    for secret in matching:
        found = _open_block(secret, sealed) if block else _open_box(secret, sealed)
        if found is not None:
            return found
    raise TokenError("the link's token is forged or was altered", hint=_HINT)


@functools.lru_cache(maxsize=8)
def _block_cipher(secret: Secret) -> Cipher[modes.ECB]:
    # One block per token, each a message of its own: ECB is the block cipher applied once.
    return Cipher(algorithms.AES(derived_key(secret, _BLOCK_LABEL)), modes.ECB())  # noqa: S305


def _block_head(issue: int, place: Place) -> bytes | None:
    """A row block's first six bytes, or None when the place does not fit them."""
    if issue > 0xFFFF or max(place.section, place.item, place.link) > 0xFF or place.region > 0xF:
        return None
    first = _BLOCK_VERSION << 4 | place.region
    return bytes([first, issue >> 8, issue & 0xFF, place.section, place.item, place.link])


def _open_block(secret: Secret, sealed: bytes) -> ClickTarget | None:
    plain = _block_cipher(secret).decryptor().update(sealed)
    if plain[0] >> 4 != _BLOCK_VERSION or any(plain[_ROW_AT + _ROW_MAX :]):
        return None
    try:
        row, end = _get_varint(plain[: _ROW_AT + _ROW_MAX], _ROW_AT)
        region = Region(plain[0] & 0xF)
    except ValueError:
        return None
    if any(plain[end:]):
        return None
    place = Place(region, plain[3], plain[4], plain[5])
    return ClickTarget(plain[1] << 8 | plain[2], place, b"", None, row)


def _box_head(issue: int, place: Place, url: str, *, row: bool) -> bytes:
    head = bytearray()
    for number in (issue, place.region << 1 | row, place.section, place.item, place.link):
        head += _varint(number)
    return bytes(head + url_digest(url))


def _open_box(secret: Secret, sealed: bytes) -> ClickTarget | None:
    try:
        plain = siv_box(secret, _BOX_LABEL).decrypt(sealed, None)
    except InvalidTag:
        return None
    try:
        return _box_target(plain)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        # Genuine (the tag held) yet unreadable: only a bug of ours makes one.
        raise TokenError("the link's token is malformed", hint=_HINT) from None


def _box_target(plain: bytes) -> ClickTarget:
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


def _varint(number: int) -> bytes:
    if number < 0 or number >= 1 << (7 * _MAX_VARINT):
        raise ValueError(f"{number} is out of a token's range")
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _get_varint(data: bytes, at: int) -> tuple[int, int]:
    number = shift = 0
    for index in range(at, min(at + _MAX_VARINT, len(data))):
        byte = data[index]
        number |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return number, index + 1
        shift += 7
    raise ValueError("bad number")
