"""DKIM's relaxed canonicalization (RFC 6376, 3.4.2 and 3.4.4): a header field, or whole body
lines, in; the bytes a signer hashes out.

Both rules are local: a header field's form depends on that field alone, and a body line's on
that line alone (apart from the empty lines at the very end, which a MessageFactory body never
has: it ends with its closing MIME boundary). So what is the same in every message of an issue is
canonicalized once, and per recipient only the fields and lines that change.
"""

from __future__ import annotations

import re

_WSP = re.compile(rb"[\t ]+")
_SPACES = re.compile(rb"  +")  # a literal start: the regex engine skips to it quickly


def relaxed_field(field: bytes) -> tuple[bytes, bytes]:
    """``Name: value`` with its CRLF (and any folded lines) -> the lowercased name, and the field
    as hashed: name lowercased, lines unfolded, each run of spaces and tabs one space, none at
    either end of the value, CRLF-terminated."""
    name, _, value = field.partition(b":")
    name = name.lower().rstrip(b" \t")
    value = _WSP.sub(b" ", value.replace(b"\r\n", b"")).strip(b" \t")
    return name, name + b":" + value + b"\r\n"


def relaxed_lines(lines: bytes) -> bytes:
    """Whole body lines (each CRLF-terminated) -> their relaxed form: no space or tab before a
    line end, each other run of them one space."""
    # Compressing first leaves at most one space before a line end: the same result as
    # RFC 6376's order (strip, then compress), in passes that are fast on mostly clean lines.
    if b"\t" in lines:
        lines = lines.replace(b"\t", b" ")
    if b"  " in lines:
        lines = _SPACES.sub(b" ", lines)
    if b" \r\n" in lines:
        lines = lines.replace(b" \r\n", b"\r\n")
    return lines
