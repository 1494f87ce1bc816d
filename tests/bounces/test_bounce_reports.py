"""Each mail in tests/data/bounces/ is classified as expected.toml says; no auto-reply counts."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pytest

from newsletter.bounces.kinds import Kind, find_status, kind_of
from newsletter.bounces.reports import read_report
from newsletter.bounces.verp import make_tag, read_tag

CORPUS = Path(__file__).resolve().parents[1] / "data" / "bounces"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))
SECRET = b"corpus-secret-for-tests-only"


def test_every_file_has_an_expectation() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.eml")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_is_classified(name: str) -> None:
    want = EXPECTED[name]
    report = read_report((CORPUS / name).read_bytes())
    got = [f"{f.kind.value} {f.status or '-'} {f.address}".rstrip(" ") for f in report.findings]
    assert report.kind == Kind(want["kind"])
    assert report.source == want["source"]
    assert got == [line.rstrip(" ") for line in want["findings"]]
    if "row" in want:
        # The tag the mail carries is the one signed for its row, and it verifies.
        tag = make_tag(SECRET, want["row"])
        assert tag in report.tags
        assert [read_tag(SECRET, t) for t in report.tags] == [want["row"]]
    if "message_id" in want:
        assert want["message_id"] in report.message_ids


def test_no_auto_reply_counts() -> None:
    for name in EXPECTED:
        report = read_report((CORPUS / name).read_bytes())
        if name.startswith(("autoreply-", "human-")):
            assert not report.kind.counts, name
            assert report.findings == (), name


def test_reading_twice_gives_the_same_key() -> None:
    raw = (CORPUS / "qmail-no-mailbox.eml").read_bytes()
    assert read_report(raw).key == read_report(raw).key
    no_id = raw.replace(b"Message-ID: <20261130080559.4711.qmail@mail.example.net>\n", b"")
    assert read_report(no_id).key.startswith("sha256:")
    assert read_report(no_id).key == read_report(no_id).key
    assert read_report(no_id).key != read_report(no_id + b"\n").key


@pytest.mark.parametrize(
    ("status", "action", "kind"),
    [
        ("5.1.1", "failed", Kind.HARD),
        ("5.1.10", "failed", Kind.HARD),
        ("5.4.4", "failed", Kind.HARD),
        ("5.2.2", "failed", Kind.SOFT),
        ("5.3.4", "failed", Kind.SOFT),
        ("5.6.0", "failed", Kind.SOFT),  # content: never the address
        ("5.2.3", "failed", Kind.SOFT),  # too long
        ("5.5.0", "failed", Kind.HARD),  # Outlook.com's dead mailbox
        ("5.7.26", "failed", Kind.SOFT),
        ("4.2.2", "failed", Kind.SOFT),
        ("4.4.7", "delayed", Kind.DELAYED),
        ("", "failed", Kind.HARD),
        ("2.0.0", "delivered", None),
        ("2.0.0", "failed", None),
        ("", "relayed", None),
    ],
)
def test_status_table(status: str, action: str, kind: Kind | None) -> None:
    assert kind_of(status, action) == kind


def test_find_status() -> None:
    assert find_status("550-5.1.1 The email account that you tried to reach") == "5.1.1"
    assert find_status("550 Unrouteable address") == "5.0.0"
    assert find_status("452 too many") == "4.0.0"
    assert find_status("user unknown") == ""


def test_a_forged_tag_is_refused() -> None:
    tag = make_tag(SECRET, 4242)
    ident, mac = tag.split("-")
    assert read_tag(SECRET, tag) == 4242
    assert read_tag(SECRET, tag.upper()) == 4242  # relays may fold the case of a local part
    assert read_tag(SECRET, f"{ident}-{'a' * 10}") is None
    assert read_tag(SECRET, f"{int(ident, 36) + 1:x}-{mac}") is None
    assert read_tag(b"another-secret-of-enough-length", tag) is None
    assert read_tag(SECRET, "") is None
    assert read_tag(SECRET, "not a tag") is None
    assert "4242" not in tag


def test_a_report_without_markers_is_not_understood() -> None:
    report = read_report(b"From: someone@example.org\nSubject: hello\n\nJust words.\n")
    assert report.kind is Kind.UNKNOWN
    assert not report.understood
    assert report.source == ""


def test_garbage_never_raises() -> None:
    for raw in (b"", b"\x00\xff\xfe", b"Content-Type: multipart/report\n\n--x--", b"\n\n\n"):
        assert read_report(raw).kind is Kind.UNKNOWN


def test_damaged_mail_never_raises() -> None:
    """Truncated mail, raw 8-bit and broken encoded words in headers, random bytes: each is
    classified (often as not understood), never an exception that would end `newsletter
    bounces` halfway through a mailbox."""
    rng = random.Random(12)
    for path in sorted(CORPUS.glob("*.eml")):
        raw = path.read_bytes()
        for cut in range(0, len(raw), max(1, len(raw) // 12)):
            read_report(raw[:cut])
            read_report(raw[:cut] + b"\xff\xfe =?utf-8?b?zz?=\n")
        for _ in range(10):
            damaged = bytearray(raw)
            for _ in range(30):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            assert isinstance(read_report(bytes(damaged)).kind, Kind)
