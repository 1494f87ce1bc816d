"""An outbox row id in, a short signed VERP tag out (and back): `bounces+3f-k2m4q7x9ab@domain`.

The tag is ``ID-MAC``: the row id in base 36 and the first 10 characters (50 bits) of
HMAC-SHA256(NEWSLETTER_SECRET, label + id) in lower-case base 32. Lower case only, because some
relays fold the case of local parts; no address in clear, because bounces are read by people and
tools the reader never agreed to. A forged or altered tag reads as None: a report must never
suppress someone on the strength of a tag anybody could write.

The same tag rides in the `X-Newsletter-Tag` header, for relays that rewrite the return path
(Amazon SES, Gmail) and for bounces that only quote the original headers.
"""

from __future__ import annotations

import hmac
import re

TAG_HEADER = "X-Newsletter-Tag"
_LABEL = b"newsletter-verp-v1\n"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"  # RFC 4648, lower case
TAG = re.compile(r"([0-9a-z]{1,13})-([a-z2-7]{10})")
# In a quoted header, a return path or a Delivered-To line; case-folded relays included.
_FOUND = re.compile(
    rf"\+([0-9a-z]{{1,13}}-[a-z2-7]{{10}})@|{TAG_HEADER}:\s*([0-9a-z]{{1,13}}-[a-z2-7]{{10}})\b",
    re.IGNORECASE,
)


def make_tag(secret: bytes, row_id: int) -> str:
    """The tag of one outbox row."""
    if row_id < 0:
        raise ValueError("a row id is never negative")
    ident = _base36(row_id)
    return f"{ident}-{_mac(secret, ident)}"


def read_tag(secret: bytes, tag: str) -> int | None:
    """The row id a genuine tag names; None for anything forged, altered or malformed."""
    match = TAG.fullmatch(tag.strip().lower())
    if not match:
        return None
    ident, mac = match.groups()
    if not hmac.compare_digest(mac, _mac(secret, ident)):
        return None
    return int(ident, 36)


def return_path(address: str, tag: str) -> str:
    """`bounces@news.example.org` + tag -> `bounces+TAG@news.example.org`."""
    local, _, domain = address.rpartition("@")
    return f"{local}+{tag}@{domain}"


def find_tags(text: str) -> list[str]:
    """Every candidate tag in a text (unverified, lower-cased, in order, once each)."""
    seen: dict[str, None] = {}
    for match in _FOUND.finditer(text):
        seen[(match.group(1) or match.group(2)).lower()] = None
    return list(seen)


def _mac(secret: bytes, ident: str) -> str:
    digest = hmac.digest(secret, _LABEL + ident.encode("ascii"), "sha256")
    # The first 50 bits in base 32 (what b32encode(digest)[:10] gives), without encoding all 32
    # bytes in pure Python: that was a fifth of a message build (benchmarks/bounces.py).
    bits = int.from_bytes(digest[:7], "big") >> 6
    return "".join(_BASE32[(bits >> shift) & 31] for shift in range(45, -1, -5))


def _base36(number: int) -> str:
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = _DIGITS[rest] + out
        if not number:
            return out
