"""Header words, folding and body encoders, directly: the pieces message.py joins."""

from __future__ import annotations

import base64
import binascii
import email.header
import random

import pytest

from newsletter.errors import UnsafeHeaderError
from newsletter.mail.canonical import relaxed_lines
from newsletter.mail.mime import (
    FOLD_AT,
    Base64,
    QuotedPrintable,
    check_header_value,
    choose_encoder,
    encode_words,
    mailbox_header,
    part_head,
    unstructured_header,
)


def decoded(header: str) -> str:
    value = header.split(":", 1)[1].replace("\r\n", "").strip()
    return str(email.header.make_header(email.header.decode_header(value)))


def test_cjk_prefers_base64_and_ascii_quoted_printable() -> None:
    assert isinstance(choose_encoder(["中文内容".encode() * 100]), Base64)
    assert isinstance(choose_encoder([b"plain English text " * 100]), QuotedPrintable)


@pytest.mark.parametrize("encoder", [Base64, QuotedPrintable])
def test_encoders_fill_values_between_segments_exactly(encoder: type) -> None:
    segments = ["你好，".encode(), " 再见\r\n".encode() * 40, b""]
    coder = encoder(segments)
    values = ["李雷".encode(), b".dot " * 30]
    body = b"".join(coder.encode(values))
    assert body.endswith(b"\r\n")
    lines = body.split(b"\r\n")[:-1]
    assert all(len(line) <= 76 for line in lines)
    assert b"\n" not in body.replace(b"\r\n", b"")
    if coder.smtp_ready:  # the encoder vouches that SMTP needs no dot-stuffing
        assert not any(line.startswith(b".") for line in lines)
    expected = segments[0] + values[0] + segments[1] + values[1] + segments[2]
    if encoder is Base64:
        assert base64.b64decode(body) == expected
    else:
        # The last line break belongs to the boundary that follows the part.
        assert binascii.a2b_qp(body) == expected + b"\r\n"


SPACED = [
    b"Hi  there,\r\n\tindented\r\n    more\r\nDear ",
    b",  welcome \r\n" + b"word  word\tword   \r\n" * 30 + b"a long line " * 20,
    b" end\r\n",
]


@pytest.mark.parametrize("encoder", [Base64, QuotedPrintable])
@pytest.mark.parametrize(
    "values", [[b"", b""], [b"Li  Lei", b"x" * 200], [b" \t ", b"  "], ["李雷".encode(), b"."]]
)
def test_relaxed_lines_are_the_relaxed_form_of_the_lines(
    encoder: type, values: list[bytes]
) -> None:
    coder = encoder(SPACED)
    lines, relaxed = coder.encode_relaxed(values)
    assert lines == coder.encode(values)
    assert b"".join(relaxed) == relaxed_lines(b"".join(lines))
    if encoder is Base64:
        assert relaxed is lines  # base64 lines are their own relaxed form
    # The leading lines are the same for every recipient (the signer hashes them once).
    assert b"".join(relaxed).startswith(coder.leading)


def test_the_leading_lines_are_those_before_the_first_value() -> None:
    first = b"line one\r\nline  two\r\n" * 10 + b"Dear "
    qp = QuotedPrintable([first, b"\r\n"])
    # Up to the soft break that ends the segment before the value ("Dear " ends in "=20").
    assert qp.leading == relaxed_lines(binascii.b2a_qp(first, istext=True) + b"=\r\n")
    assert qp.leading.endswith(b"Dear=20=\r\n")
    b64 = Base64([first, b"\r\n"])
    full = len(first) // 57 * 57
    assert b64.leading == b"".join(
        base64.b64encode(first[i : i + 57]) + b"\r\n" for i in range(0, full, 57)
    )
    assert len(b64.leading) > 200
    # No value at all: every line is the same for everyone.
    assert Base64([first]).leading == b"".join(Base64([first]).encode([]))
    assert QuotedPrintable([b"a\r\nb"]).leading == b"".join(QuotedPrintable([b"a\r\nb"]).encode([]))
    assert QuotedPrintable([b"Hi ", b"\r\n"]).leading == b"Hi=20=\r\n"
    assert QuotedPrintable([b"", b"\r\n"]).leading == b""


@pytest.mark.parametrize("size", [0, 1, 2, 40, 73, 74, 75, 76, 77, 150, 151, 152, 300])
@pytest.mark.parametrize("unit", ["x", "é", "x ", "=", ".", " "])
def test_quoted_printable_values_of_any_length_keep_lines_short_and_decode_exactly(
    size: int, unit: str
) -> None:
    segments = [b"Hi ", b", welcome\r\n" + b"long static line " * 10, b" end", b""]
    value = (unit * size).encode()[:size] if unit != "é" else ("é" * size).encode()
    coder = QuotedPrintable(segments)
    body = b"".join(coder.encode([value, value, b"tail"]))
    lines = body.split(b"\r\n")[:-1]
    assert all(len(line) <= 76 for line in lines)
    assert b"\n" not in body.replace(b"\r\n", b"")
    assert binascii.a2b_qp(body) == b"Hi " + value + segments[1] + value + b" end" + b"tail\r\n"


def test_quoted_printable_encodes_only_the_values_per_recipient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from newsletter.mail import mime

    coder = QuotedPrintable([b"Hi ", b", welcome\r\n" + b"a long line " * 500, b"\r\n"])
    encoded: list[bytes] = []
    real = mime._qp

    def counting(data: bytes) -> bytes:
        encoded.append(data)
        return real(data)

    monkeypatch.setattr(mime, "_qp", counting)
    first = coder.encode([b"Li Lei", b"https://x.example/u/1"])
    second = coder.encode([b"Ann", b"https://x.example/u/2"])
    assert encoded == [b"Li Lei", b"https://x.example/u/1", b"Ann", b"https://x.example/u/2"]
    # The static segments are the same bytes objects in every message, encoded once.
    assert first[0] is second[0]
    assert first[2] is second[2]


def test_unstructured_ascii_folds_at_spaces_and_non_ascii_as_encoded_words() -> None:
    ascii_header = unstructured_header("Subject", "word " * 40)
    assert all(len(line) <= FOLD_AT for line in ascii_header.split("\r\n"))
    cjk = unstructured_header("Subject", "人工智能系统内容推荐" * 8)
    assert "?==?" not in cjk
    assert decoded(cjk) == "人工智能系统内容推荐" * 8


def test_encoded_words_are_at_most_75_characters_and_whole_characters() -> None:
    words = encode_words("🙂中" * 50, 40)
    assert all(len(w) <= 75 for w in words)
    assert "".join(str(email.header.make_header(email.header.decode_header(w))) for w in words)


def test_mailbox_header_quotes_or_encodes_the_name() -> None:
    assert mailbox_header("From", "", "a@x.org") == "From: <a@x.org>\r\n"
    assert mailbox_header("From", "Ann Lee", "a@x.org") == "From: Ann Lee <a@x.org>\r\n"
    assert mailbox_header("From", 'Lee, "Ann"', "a@x.org") == 'From: "Lee, \\"Ann\\"" <a@x.org>\r\n'
    assert decoded(mailbox_header("From", "李雷", "a@x.org")).startswith("李雷")


@pytest.mark.parametrize("value", ["a\r\nBcc: x@y", "a\n", "a\x00b", "=?utf-8?q?=0A?="])
def test_header_values_that_could_inject_are_refused(value: str) -> None:
    with pytest.raises(UnsafeHeaderError):
        check_header_value(value, "subject")


def test_part_head_names_type_charset_and_encoding() -> None:
    head = part_head("text/plain", "base64", "b1")
    assert head == (
        b'--b1\r\nContent-Type: text/plain; charset="utf-8"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n"
    )


@pytest.mark.parametrize("seed", range(40))
def test_runs_of_fixed_length_values_encode_as_each_alone(seed: int) -> None:
    """The same lines, byte for byte, whether the values of fixed length (tracked links) are
    taken a run at a time or each alone: every offset a run can start at, short and long
    segments, values that span lines, runs at the start and the end."""
    rng = random.Random(seed)
    count = rng.randint(2, 30)
    segments = [
        rng.randbytes(rng.choice((0, 1, 3, 20, 56, 57, 58, 130, 400))) for _ in range(count + 1)
    ]
    fixed = {n: rng.choice((1, 24, 51, 57, 60, 120)) for n in range(count) if rng.random() < 0.7}
    runs = Base64(segments, fixed)
    alone = Base64(segments)
    for _ in range(12):
        values = [
            rng.randbytes(fixed[n]) if n in fixed else rng.randbytes(rng.randint(0, 70))
            for n in range(count)
        ]
        made = b"".join(runs.encode(values, fixed=True))
        assert made == b"".join(alone.encode(values))
        assert base64.b64decode(made) == b"".join(
            piece for pair in zip(segments, [*values, b""], strict=True) for piece in pair
        )
        assert all(len(line) <= 76 for line in made.split(b"\r\n"))
