"""MIME encoding for message.py: header values as folded RFC 2047 words, and body parts as
base64 or quoted-printable that encode per recipient only the lines a value touches (and, for
DKIM, canonicalize only those lines: the rest is done once per issue).

Nothing here uses the `email` package: on this Python its header folding can be made to inject
headers (CVE-2024-6923, CVE-2026-1299) and its generator costs milliseconds per message.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from typing import Protocol

from newsletter.errors import UnsafeHeaderError
from newsletter.mail.canonical import relaxed_lines
from newsletter.models import header_problem

CRLF = b"\r\n"
MAX_LINE = 998
FOLD_AT = 78
_ATOM_PHRASE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~ -]*")
PRINTABLE = re.compile(r"[\x20-\x7e]*")


class Encoder(Protocol):
    name: str
    # Every line encode() returns ends in CRLF and none starts with "." (nothing for SMTP to
    # dot-stuff), whatever the values.
    smtp_ready: bool
    # The lines every encode() result starts with, whatever the values, in DKIM's relaxed form.
    leading: bytes

    def encode(self, values: Sequence[bytes]) -> list[bytes]: ...

    def encode_relaxed(self, values: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
        """encode()'s lines, and the same lines in DKIM's relaxed body form (the same list
        when the lines are their own relaxed form)."""
        ...


def choose_encoder(segments: list[bytes]) -> Encoder:
    """Base64 or quoted-printable, whichever makes this part smaller (CJK: base64, ~1.4x)."""
    sample = b"".join(segments)
    qp_size = len(binascii.b2a_qp(sample, istext=True))
    base64_size = (len(sample) + 56) // 57 * 78
    if qp_size <= base64_size:
        return QuotedPrintable(segments)
    return Base64(segments)


class Base64:
    """Base64 in 76-character lines, re-encoding only the lines a value touches.

    A static segment encodes the same way whenever it starts at the same offset modulo 57 (the
    input bytes of one line), so its full lines are encoded once per offset and then reused.
    """

    name = "base64"
    smtp_ready = True  # the base64 alphabet has no "." and every line gets its CRLF here
    _IN = 57

    def __init__(self, segments: list[bytes]) -> None:
        self._segments = segments
        self._cache: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        if len(segments) == 1:
            self.leading = b"".join(self.encode([]))
        else:
            first = segments[0]
            full = len(first) // self._IN * self._IN
            lines = (_b64_line(first[i : i + self._IN]) for i in range(0, full, self._IN))
            self.leading = b"".join(lines)

    def encode(self, values: Sequence[bytes]) -> list[bytes]:
        out: list[bytes] = []
        carry = b""
        for index, segment in enumerate(self._segments):
            if index:
                carry += values[index - 1]
                while len(carry) >= self._IN:
                    out.append(_b64_line(carry[: self._IN]))
                    carry = carry[self._IN :]
            need = self._IN - len(carry)
            if len(segment) < need:
                carry += segment
                continue
            out.append(_b64_line(carry + segment[:need]))
            lines, carry = self._lines(index, need)
            out.append(lines)
        if carry:
            out.append(_b64_line(carry))
        return out

    def encode_relaxed(self, values: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
        # Base64 lines hold no space or tab: each is its own relaxed form.
        lines = self.encode(values)
        return lines, lines

    def _lines(self, index: int, start: int) -> tuple[bytes, bytes]:
        cached = self._cache.get((index, start))
        if cached is None:
            segment = self._segments[index]
            end = start + (len(segment) - start) // self._IN * self._IN
            encoded = binascii.b2a_base64(segment[start:end], newline=False)
            lines = b"".join(encoded[i : i + 76] + CRLF for i in range(0, len(encoded), 76))
            cached = self._cache[(index, start)] = (lines, segment[end:])
        return cached


def _b64_line(chunk: bytes) -> bytes:
    return binascii.b2a_base64(chunk, newline=False) + CRLF


class QuotedPrintable:
    """Quoted-printable (76-column soft breaks), encoding per recipient only the values.

    A soft line break (``=`` CRLF, which decodes to nothing) before and after each value makes
    every static segment start a line of its own, so each is encoded once, whatever the values
    around it; per recipient only the values are encoded, each on lines of its own.
    """

    name = "quoted-printable"
    smtp_ready = False  # a line may start with "." (b2a_qp only encodes a lone one)

    def __init__(self, segments: list[bytes]) -> None:
        last = len(segments) - 1
        # The body must end with a line break; it belongs to the boundary that follows.
        self._static = [
            _qp(segment) + CRLF if index == last else _line_end(_qp(segment))
            for index, segment in enumerate(segments)
        ]
        # Their relaxed forms (DKIM), made when a signer first asks.
        self._relaxed: list[bytes] | None = None
        self.leading = relaxed_lines(self._static[0] if last else b"".join(self._static))

    def encode(self, values: Sequence[bytes]) -> list[bytes]:
        out = [self._static[0]]
        for value, static in zip(values, self._static[1:], strict=True):
            if value:
                out.append(_line_end(_qp(value)))
            out.append(static)
        return out

    def encode_relaxed(self, values: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
        if self._relaxed is None:
            self._relaxed = [relaxed_lines(static) for static in self._static]
        out, relaxed = [self._static[0]], [self._relaxed[0]]
        for value, static, canonical in zip(
            values, self._static[1:], self._relaxed[1:], strict=True
        ):
            if value:
                lines = _line_end(_qp(value))
                out.append(lines)
                relaxed.append(relaxed_lines(lines))
            out.append(static)
            relaxed.append(canonical)
        return out, relaxed


def _line_end(encoded: bytes) -> bytes:
    """Encoded quoted-printable that ends its last line: as it is after a CRLF (or when empty),
    else with a soft break, the line split first if the "=" would take it past 76 columns."""
    if not encoded or encoded.endswith(CRLF):
        return encoded
    start = encoded.rfind(b"\n") + 1
    if len(encoded) - start > 75:
        cut = start + 75
        # Never inside an =XX escape.
        if encoded[cut - 1 : cut] == b"=":
            cut -= 1
        elif encoded[cut - 2 : cut - 1] == b"=":
            cut -= 2
        encoded = encoded[:cut] + b"=\r\n" + encoded[cut:]
    return encoded + b"=\r\n"


def _qp(data: bytes) -> bytes:
    encoded = binascii.b2a_qp(data, istext=True)
    # b2a_qp copies the first line break it sees; with none in `data` its soft breaks are bare LF.
    return encoded if CRLF in data else encoded.replace(b"=\n", b"=\r\n")


def part_head(content_type: str, encoding: str, boundary: str) -> bytes:
    """The delimiter and headers that open one body part."""
    return (
        f"--{boundary}\r\n"
        f'Content-Type: {content_type}; charset="utf-8"\r\n'
        f"Content-Transfer-Encoding: {encoding}\r\n\r\n"
    ).encode("ascii")


# -- headers -------------------------------------------------------------------------------------


def check_header_value(value: str, field: str) -> None:
    problem = header_problem(value)
    if problem is not None:
        raise UnsafeHeaderError(f"{field}: {problem}")


def mailbox_header(field: str, name: str, address: str) -> str:
    """`Field: phrase <address>`, the phrase quoted or RFC 2047-encoded and folded as needed."""
    check_header_value(name, field)
    if not name:
        return f"{field}: <{address}>\r\n"
    if _ATOM_PHRASE.fullmatch(name):
        words = [name]
    elif name.isascii() and PRINTABLE.fullmatch(name):
        words = ['"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"']
    else:
        words = encode_words(name, FOLD_AT - len(field) - 2)
    return fold_words(field, [*words, f"<{address}>"])


def unstructured_header(field: str, value: str) -> str:
    """An unstructured header: plain ASCII folded at spaces, anything else as encoded words."""
    room = FOLD_AT - len(field) - 2
    if value.isascii() and PRINTABLE.fullmatch(value):
        words = re.split(r"(?<=\S)(?= )", value)
        if max(len(w) for w in words) < MAX_LINE - len(field) - 4:
            lines = [words[0]]
            for word in words[1:]:
                if len(lines[-1]) + len(word) > room:
                    lines.append(word)
                else:
                    lines[-1] += word
            return f"{field}: " + "\r\n".join(lines) + "\r\n"
    return fold_words(field, encode_words(value, room))


def encode_words(text: str, first_room: int) -> list[str]:
    """RFC 2047 B-encoded words of at most 75 characters, split between whole characters.

    `fold_words` always puts whitespace between them: never the `?==?` that some Python versions
    produce and some clients then show raw.
    """
    words: list[str] = []
    room = max(first_room, 16)
    chunk = b""
    for char in text:
        data = char.encode()
        if len(chunk) + len(data) > (min(room, 75) - 12) // 4 * 3:
            words.append(_word(chunk))
            chunk = b""
            room = 75
        chunk += data
    if chunk or not words:
        words.append(_word(chunk))
    return words


def _word(data: bytes) -> str:
    return "=?utf-8?b?" + binascii.b2a_base64(data, newline=False).decode("ascii") + "?="


def fold_words(field: str, words: list[str]) -> str:
    """Join words with spaces, breaking the line (CRLF + space) before any word that would
    push it past 78 characters."""
    line = f"{field}: {words[0]}"
    lines = []
    for word in words[1:]:
        if len(line) + 1 + len(word) > FOLD_AT:
            lines.append(line)
            line = " " + word
        else:
            line += " " + word
    lines.append(line)
    return "\r\n".join(lines) + "\r\n"
