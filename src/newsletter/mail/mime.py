"""MIME encoding for message.py: header values as folded RFC 2047 words, and body parts as
base64 or quoted-printable that encode per recipient only the lines a value touches (and, for
DKIM, canonicalize only those lines: the rest is done once per issue).

Nothing here uses the `email` package: on this Python its header folding can be made to inject
headers (CVE-2024-6923, CVE-2026-1299) and its generator costs milliseconds per message.
"""

from __future__ import annotations

import binascii
import re
import struct
from collections.abc import Mapping, Sequence
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

    def encode(self, values: Sequence[bytes], *, fixed: bool = False) -> list[bytes]:
        """`fixed`: every value the encoder was told has a fixed length has it (see Base64)."""
        ...

    def encode_relaxed(
        self, values: Sequence[bytes], *, fixed: bool = False
    ) -> tuple[list[bytes], list[bytes]]:
        """encode()'s lines, and the same lines in DKIM's relaxed body form (the same list
        when the lines are their own relaxed form)."""
        ...


def choose_encoder(segments: list[bytes], fixed: Mapping[int, int] | None = None) -> Encoder:
    """Base64 or quoted-printable, whichever makes this part smaller (CJK: base64, ~1.4x);
    `fixed`: the values whose length never changes (a value's index -> its length)."""
    sample = b"".join(segments)
    qp_size = len(binascii.b2a_qp(sample, istext=True))
    base64_size = (len(sample) + 56) // 57 * 78
    if qp_size <= base64_size:
        return QuotedPrintable(segments)
    return Base64(segments, fixed)


class Base64:
    """Base64 in 76-character lines, re-encoding only the lines a value touches.

    A static segment encodes the same way whenever it starts at the same offset modulo 57 (the
    input bytes of one line), so its full lines are encoded once per offset and then reused.

    Values whose length never changes (`fixed`: a value's index -> its length in bytes, such as
    per-reader click URLs) are taken a run at a time: a run of them and the segments between
    lands at the same places whenever it starts at the same offset, so which of its lines they
    touch, and every other line, are worked out once per offset (_Run); per message the touched
    lines are joined, encoded and cut apart in one call each, however many values the run holds.
    """

    name = "base64"
    smtp_ready = True  # the base64 alphabet has no "." and every line gets its CRLF here
    _IN = 57

    def __init__(self, segments: list[bytes], fixed: Mapping[int, int] | None = None) -> None:
        self._segments = segments
        self._cache: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        # A run's first value -> its last; at least two values make one worth it.
        self._runs: dict[int, int] = {}
        self._fixed = dict(fixed or {})
        index = 0
        while index < len(segments) - 1:
            last = index
            while last + 1 in self._fixed and last in self._fixed:
                last += 1
            if index in self._fixed and last > index:
                self._runs[index] = last
            index = last + 1
        self._templates: dict[tuple[int, int], _Run] = {}
        if len(segments) == 1:
            self.leading = b"".join(self.encode([]))
        else:
            first = segments[0]
            full = len(first) // self._IN * self._IN
            lines = (_b64_line(first[i : i + self._IN]) for i in range(0, full, self._IN))
            self.leading = b"".join(lines)

    def encode(self, values: Sequence[bytes], *, fixed: bool = False) -> list[bytes]:
        """`fixed`: the caller vouches that every value the constructor's `fixed` names has
        that length (else each value is taken alone)."""
        # The hot path: names bound locally, no call per line but the encoder's own.
        out: list[bytes] = []
        append = out.append
        b2a = binascii.b2a_base64
        cache = self._cache
        runs = self._runs if fixed else {}
        size = self._IN
        carry = b""
        segments = self._segments
        index = 0
        while index < len(segments):
            segment = segments[index]
            if index:
                last = runs.get(index - 1)
                if last is not None:
                    key = (index - 1, len(carry))
                    run = self._templates.get(key) or self._template(*key, last)
                    carry = run.fill(carry, values[index - 1 : last + 1], out)
                    index = last + 2
                    continue
                carry += values[index - 1]
                while len(carry) >= size:
                    append(b2a(carry[:size], newline=False) + CRLF)
                    carry = carry[size:]
            need = size - len(carry)
            index += 1
            if len(segment) < need:
                carry += segment
                continue
            append(b2a(carry + segment[:need], newline=False) + CRLF)
            cached = cache.get((index - 1, need)) or self._lines(index - 1, need)
            append(cached[0])
            carry = cached[1]
        if carry:
            append(b2a(carry, newline=False) + CRLF)
        return out

    def encode_relaxed(
        self, values: Sequence[bytes], *, fixed: bool = False
    ) -> tuple[list[bytes], list[bytes]]:
        # Base64 lines hold no space or tab: each is its own relaxed form.
        lines = self.encode(values, fixed=fixed)
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

    def _template(self, first: int, carry: int, last: int) -> _Run:
        # The run's bytes: the carry, then each value and the segment after it.
        pieces: list[int | bytes] = [carry]
        for index in range(first, last + 1):
            pieces += [self._fixed[index], self._segments[index + 1]]
        run = self._templates[(first, carry)] = _Run(pieces, self._IN)
        return run


class _Run:
    """One run of fixed-length values and the segments between them, from one offset: where
    its values land, the lines they leave alone (encoded here, once), and the bytes of the
    ones they touch with a slot for each value, in order."""

    __slots__ = ("cut", "out", "pieces", "unpack")

    def __init__(self, layout: list[int | bytes], size: int) -> None:
        # Where each value (an int: its length) and each static segment (bytes) lands.
        spans: list[tuple[int, int, bytes | None]] = []
        at = 0
        for item in layout:
            length = item if isinstance(item, int) else len(item)
            spans.append((at, at + length, None if isinstance(item, int) else item))
            at += length
        lines = at // size
        dirty = {
            n
            for a, b, data in spans
            if data is None
            for n in range(a // size, min((b - 1) // size + 1, lines))
        }
        touched = sorted(dirty)
        keep = [(n * size, (n + 1) * size) for n in touched] + [(lines * size, at)]

        def static(a: int, b: int) -> bytes:
            return b"".join(
                data[max(a, s) - s : min(b, e) - s]
                for s, e, data in spans
                if data and s < b and e > a
            )

        # The touched lines and the tail, in order, as statics between the values' slots.
        statics = [b""]
        for s, e, data in spans:
            if data is None:
                statics.append(b"")
                continue
            for a, b in keep:
                if a < e and b > s:
                    statics[-1] += data[max(a, s) - s : min(b, e) - s]
        self.pieces = [piece for static_ in statics for piece in (static_, b"")][:-1]
        self.cut = len(touched) * size
        self.unpack = struct.Struct("76s" * len(touched)).unpack
        # The run's full lines: the untouched ones encoded, a slot for each touched one.
        out: list[bytes] = [b""]
        for n in range(lines):
            if n in dirty:
                out += [b"", CRLF]
            else:
                out[-1] += _b64_line(static(n * size, (n + 1) * size))
        self.out = out

    def fill(self, carry: bytes, values: Sequence[bytes], out: list[bytes]) -> bytes:
        """The run's lines for one message (`carry`: the bytes before it in its first line)
        added to `out`; the bytes it leaves for the next line."""
        pieces = self.pieces
        pieces[1::2] = [carry, *values]
        raw = b"".join(pieces)
        if self.cut:
            lines = self.out
            lines[1::2] = self.unpack(
                binascii.b2a_base64(memoryview(raw)[: self.cut], newline=False)
            )
            out += lines  # the pieces, not a copy of the run's bytes: the message joins once
        return raw[self.cut :]


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

    def encode(self, values: Sequence[bytes], *, fixed: bool = False) -> list[bytes]:
        out = [self._static[0]]
        for value, static in zip(values, self._static[1:], strict=True):
            if value:
                out.append(_line_end(_qp(value)))
            out.append(static)
        return out

    def encode_relaxed(
        self, values: Sequence[bytes], *, fixed: bool = False
    ) -> tuple[list[bytes], list[bytes]]:
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
