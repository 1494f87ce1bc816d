"""The preview's Mailbox over real HTTP on 127.0.0.1, fed by the real capture server: a test send
read the way the issue view shows an email, and what a stranger can send shown safely."""

from __future__ import annotations

import email
import email.policy
import mailbox
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from newsletter.send.mailbox import LISTED_LIMIT, captured_messages
from newsletter.web.preview.pages import CAPTURED_POLICY, email_document
from newsletter.web.preview.received import (
    READ_LIMIT,
    disarm_frames,
    measure_structure,
    open_received,
    parse_bounded,
    text_charset,
    visible,
)
from support.capture import capture_server, deliver, send_test
from support.preview import RunningPreview, running_preview

SUBJECT = "【测试】AI系统内容推荐第14期"

# What anyone who reaches the capture server can send: markup in every header and part, an
# encoded line break and escape in the subject, a right-to-left override, remote resources.
HOSTILE = b"""\
From: "<script>alert(1)</script>" <evil@example.net>
To: reader@example.org
Subject: =?UTF-8?Q?Hi=0D=0AX-Injected:_yes=1B[31m=E2=80=AEgpj.exe?=
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=utf-8

</pre><script>alert(2)</script> &amp; plain
--inner
Content-Type: text/html; charset=utf-8

<html><head><style>@media (prefers-color-scheme: dark) { p { color: #fff } }</style></head>
<body><p>Hello<script>alert(3)</script></p><img src="http://127.0.0.1:9/pixel.gif"></body></html>
--inner--
--outer
Content-Type: application/octet-stream
Content-Disposition: attachment; filename="=?utf-8?q?<b>bad=0A.exe?="

AAAA
--outer--
""".replace(b"\n", b"\r\n")


@pytest.fixture
def preview(project: Path) -> Iterator[RunningPreview]:
    with running_preview(project) as running:
        yield running


@pytest.fixture
def capture(project: Path) -> Iterator[int]:
    with capture_server(project) as port:
        yield port


def get(preview: RunningPreview, path: str) -> httpx.Response:
    return httpx.get(preview.url + path, timeout=60)


def keys(preview: RunningPreview) -> dict[str, str]:
    """Subject (as listed) -> Maildir key, from the Mailbox page's links."""
    page = get(preview, "/mailbox").text
    rows = re.findall(r'<td><a href="/mailbox/([^"/]+)">(.*?)</a></td>', page)
    return {subject: key for key, subject in rows}


def only_key(preview: RunningPreview) -> str:
    [key] = keys(preview).values()
    return key


def pane(page: str, name: str) -> str:
    match = re.search(rf'<section class="pane" data-pane="{name}">(.*?)</section>', page, re.DOTALL)
    assert match, f"no {name} pane"
    return match.group(1)


@pytest.mark.slow
def test_a_test_send_reads_like_the_issue_view(
    preview: RunningPreview, capture: int, project: Path
) -> None:
    send_test(project, capture)
    listed = keys(preview)
    assert list(listed) == [SUBJECT]  # one subject for both recipients
    page = get(preview, "/mailbox").text
    assert page.count(f">{SUBJECT}</a>") == 2
    editor = next(
        c.key
        for c in captured_messages(project / ".newsletter" / "mailbox")
        if c.recipient == "editor@news.example.org"
    )
    response = get(preview, f"/mailbox/{editor}")
    assert response.status_code == 200
    page = response.text
    assert f'data-email-src="/mailbox/{editor}/email.html"' in page
    assert 'sandbox="allow-popups allow-popups-to-escape-sandbox"' in page  # no same-origin
    inbox = re.search(r'<div id="inbox-line".*?</div>', page, re.DOTALL)
    assert inbox is not None
    assert "AI系统内容推荐 &lt;digest@news.example.org&gt;" in inbox.group(0)
    assert f"<b>{SUBJECT}</b>" in inbox.group(0)
    # issue 29: the preheader the HTML part hides for the inbox, as the issue view shows it,
    # not the text part's opening (its greeting).
    assert '<span class="preheader">— OneFlow：从零重新设计分布式深度学习框架' in inbox.group(0)
    assert "你好" not in inbox.group(0)
    assert "编辑，你好！" in pane(page, "text")  # the recipient's own greeting
    assert "&lt;!DOCTYPE html&gt;" in pane(page, "html")
    headers = pane(page, "headers")
    assert "<tr><th>Delivered-To</th><td>editor@news.example.org</td></tr>" in headers
    assert f"<tr><th>Subject</th><td>{SUBJECT}</td></tr>" in headers  # decoded
    assert "<th>List-Unsubscribe-Post</th><td>List-Unsubscribe=One-Click</td>" in headers
    assert "=?utf-8?" in pane(page, "eml")  # the raw message, encoded words and all

    frame = get(preview, f"/mailbox/{editor}/email.html")
    assert frame.headers["content-security-policy"] == CAPTURED_POLICY
    assert frame.headers["referrer-policy"] == "no-referrer"
    assert "编辑，你好！" in frame.text
    assert '<head><base target="_blank">' in frame.text
    dark = get(preview, f"/mailbox/{editor}/email.html?scheme=dark").text
    assert "prefers-color-scheme" not in dark  # the same switch as the issue view's
    assert "@media (min-width: 0px)" in dark

    stored = next((project / ".newsletter" / "mailbox" / "new").glob(f"{editor}*"))
    download = get(preview, f"/mailbox/{editor}/message.eml?download=1")
    assert download.content == stored.read_bytes()
    assert download.headers["content-type"] == "message/rfc822"
    assert f'filename="{editor}.eml"' in download.headers["content-disposition"]
    raw = get(preview, f"/mailbox/{editor}/message.eml")
    assert raw.headers["content-type"] == "text/plain; charset=utf-8"
    assert raw.headers["x-content-type-options"] == "nosniff"
    assert email.message_from_bytes(raw.content, policy=email.policy.default)["To"] == (
        "编辑 <editor@news.example.org>"
    )


def test_a_hostile_message_is_shown_escaped(preview: RunningPreview, capture: int) -> None:
    deliver(capture, HOSTILE)
    key = only_key(preview)
    listing = get(preview, "/mailbox").text
    assert "Hi␍␊X-Injected: yes␛[31m&lt;U+202E&gt;gpj.exe" in listing
    page = get(preview, f"/mailbox/{key}").text
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pane(page, "headers")
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt; &amp;amp; plain" in pane(page, "text")
    headers = pane(page, "headers")
    # The encoded line break is shown, not obeyed: no header of its own, no hidden reordering.
    assert "<th>X-Injected</th>" not in headers
    assert "<td>Hi␍␊X-Injected: yes␛[31m&lt;U+202E&gt;gpj.exe</td>" in headers
    assert "\u202e" not in page
    assert "\x1b" not in page
    # The attachment is listed, its name decoded and escaped, its line break shown.
    assert "<th>application/octet-stream</th><td>&lt;b&gt;bad␊.exe</td>" in headers

    frame = get(preview, f"/mailbox/{key}/email.html")
    assert frame.status_code == 200
    # The markup is served as it came; the policy (and the frame's sandbox) make it inert: see
    # test_browser.py for Chromium running none of it and loading nothing.
    assert "<script>alert(3)</script>" in frame.text
    policy = frame.headers["content-security-policy"]
    assert policy == CAPTURED_POLICY
    assert "http" not in policy  # nothing remote, and nothing from the preview itself:
    assert "'self'" not in policy.split("frame-ancestors")[0]


def alternative(subject: str, text: str, html: str) -> bytes:
    return (
        f"From: a@example.net\r\nTo: b@example.org\r\nSubject: {subject}\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/alternative; boundary="b"\r\n\r\n'
        f"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}\r\n"
        f"--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}\r\n--b--\r\n"
    ).encode()


def inbox_line(preview: RunningPreview, key: str) -> str:
    page = get(preview, f"/mailbox/{key}").text
    inbox = re.search(r'<div id="inbox-line".*?</div>', page, re.DOTALL)
    assert inbox is not None
    return inbox.group(0)


def test_the_inbox_line_shows_the_preheader_else_the_text_s_opening(
    preview: RunningPreview, capture: int
) -> None:
    # issue 29: the inbox line showed the text part's start even when the HTML part hides a
    # preheader for the inbox; a part that opens with visible text has none, so the text's start.
    deliver(
        capture,
        alternative(
            "hidden",
            "Plain opening",
            '<html><head><title>T</title><style>p{color:red}</style></head><body><span style="'
            'DISPLAY: none"></span><div style="display: none; max-height:0">Read &amp; <b>'
            "&lt;script&gt;</b> this</div><p>Visible opening</p></body></html>",
        ),
    )
    deliver(
        capture,
        alternative(
            "visible",
            "Plain opening",
            '<body><p>Visible first</p><div style="display:none">not a preheader</div></body>',
        ),
    )
    listed = keys(preview)
    hidden = inbox_line(preview, listed["hidden"])
    assert '<span class="preheader">— Read &amp; &lt;script&gt; this</span>' in hidden
    assert "Visible opening" not in hidden
    assert "Plain opening" not in hidden
    visible = inbox_line(preview, listed["visible"])
    assert '<span class="preheader">— Plain opening</span>' in visible
    assert "not a preheader" not in visible


def nested_bomb(depth: int, subject: bytes = b"nested") -> bytes:
    """`depth` multiparts each inside the last: short lines, so any server takes it."""
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (n, n)
        for n in range(depth)
    )
    return b"Subject: " + subject + b"\r\n" + opening + b"Content-Type: text/plain\r\n\r\ndeep\r\n"


def folded_parameter_bomb(semicolons: int) -> bytes:
    """One Content-Type with `semicolons` inside a quoted value, folded into short lines."""
    lines = b"\r\n ".join([b";" * 900] * (semicolons // 900))
    return (
        b'Subject: parameters\r\nContent-Type: multipart/mixed; x="'
        + lines
        + b'"; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsemicolons\r\n--b--\r\n'
    )


BOMBS = {
    # Python's parser recurses per level (RecursionError past ~1000) and checks every line
    # against every open boundary.
    "nested": (nested_bomb(10_000), "declares more than 50 multipart or message parts"),
    "lines": (nested_bomb(40, b"lines") + b"\r\n" * 1_000_000, "nested parts are too many"),
    "siblings": (
        b"Subject: siblings\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"
        + b"--x\r\n\r\n" * 200_000,
        "more than 1,000 part delimiters",
    ),
    "messages": (
        b"Subject: messages\r\n" + b"Content-Type: message/rfc822\r\n\r\n" * 20_000,
        "declares more than 50",
    ),
    # The standard parameter parser is quadratic in semicolons: read as no parameters at all.
    "parameters": (folded_parameter_bomb(1_000_000), None),
    # punycode's decoder is quadratic: not a charset, decoded as UTF-8.
    "punycode": (
        b"Subject: punycode\r\nContent-Type: text/plain; charset=punycode\r\n\r\n"
        + (b"a" * 76 + b"\r\n") * 20_000,
        None,
    ),
    "huge": (
        b"Subject: huge\r\n\r\n" + (b"x" * 76 + b"\r\n") * 40_000,
        "Only the first 2 MiB of 3.0 MiB are shown",
    ),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
@pytest.mark.slow
def test_a_message_built_to_be_slow_is_bounded(
    preview: RunningPreview, capture: int, name: str
) -> None:
    bomb, note = BOMBS[name]
    deliver(capture, bomb)
    key = only_key(preview)
    # The client's 60 s timeout is the hang detector: unbounded, each of these takes minutes.
    page = get(preview, f"/mailbox/{key}")
    assert page.status_code == 200
    assert f"<tr><th>Subject</th><td>{name}</td></tr>" in page.text
    if note is not None:
        assert note in page.text
    assert get(preview, f"/mailbox/{key}/email.html").status_code == 404  # no HTML part
    download = get(preview, f"/mailbox/{key}/message.eml?download=1")
    assert len(download.content) > len(bomb)  # all of it, with the two trace headers


def raw_request(preview: RunningPreview, target: str) -> tuple[int, bytes]:
    """GET `target` byte for byte, as no client library would normalise it."""
    host, port = preview.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_a_key_names_a_captured_message_or_nothing(
    preview: RunningPreview, capture: int, project: Path
) -> None:
    deliver(capture, b"Subject: real\r\n\r\nbody\r\n")
    key = only_key(preview)
    box = project / ".newsletter" / "mailbox"
    secret = (project / "newsletter.toml").read_bytes()
    (box / "new" / ".hidden").write_bytes(secret)
    (box / "tmp" / "arriving").write_bytes(secret)  # a delivery still being written
    os.symlink(project / "newsletter.toml", box / "new" / "link")
    os.symlink(project / "newsletter.toml", box / "cur" / "flagged:2,S")
    tricks = [
        "..%2F..%2Fnewsletter.toml",
        "..%2f..%2f..%2fnewsletter.toml",
        "%2e%2e",
        "..",
        "../../newsletter.toml",
        "%2E%2E%2F%2E%2E%2Fnewsletter.toml",
        ".hidden",
        "link",
        "flagged",
        "arriving",
        "*",
        "%2A",
        f"{key[:5]}*",
        f"{key}%00",
        f"{key}%2F..%2F..%2F..%2Fnewsletter.toml",
        "new%2F.hidden",
        f"{'a' * 300}",
    ]
    for trick in tricks:
        for suffix in ("", "/email.html", "/message.eml", "/message.eml?download=1"):
            status, data = raw_request(preview, f"/mailbox/{trick}{suffix}")
            assert status in (400, 404), (trick, suffix, status)
            assert b"[smtp]" not in data, (trick, suffix)
    assert set(keys(preview).values()) == {key}  # neither the dot file nor the links listed
    # A message read by a mail client moves to cur/ with flags: still found by its key.
    [path] = (box / "new").glob(f"{key}*")
    path.rename(box / "cur" / f"{key}:2,S")
    assert get(preview, f"/mailbox/{key}").status_code == 200
    assert b"Subject: real" in get(preview, f"/mailbox/{key}/message.eml").content
    assert get(preview, f"/mailbox/{key}.eml").status_code == 404  # no second spelling


def test_a_subject_in_raw_utf8_is_listed_as_written(preview: RunningPreview, capture: int) -> None:
    # SMTPUTF8 mail carries headers as raw UTF-8; the list showed them as U+FFFD before.
    deliver(capture, "Subject: 第14期 raw\r\n\r\nbody\r\n".encode())
    assert list(keys(preview)) == ["第14期 raw"]


def finishes(work: Callable[[], object], seconds: float = 30) -> None:
    """`work` returns well within `seconds`: a liveness check for inputs built to hang, not a
    measure of speed (benchmarks/received.py measures that)."""
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "still running: unbounded on hostile input"


def test_email_document_is_linear_on_hostile_markup() -> None:
    # Both patterns used to scan to the end of the document from every opening: minutes.
    finishes(lambda: email_document("<style " * 300_000, "dark"))
    finishes(lambda: email_document("<head " * 300_000, "dark"))
    finishes(lambda: email_document("<style>" + "(prefers-color-scheme " * 100_000, "dark"))


def test_email_document_gives_a_headless_message_its_base() -> None:
    assert email_document("<p>hi</p>", "light") == '<base target="_blank"><p>hi</p>'
    assert email_document("<!DOCTYPE html><p>hi</p>", "light") == (
        '<!DOCTYPE html><base target="_blank"><p>hi</p>'
    )


def test_one_parameter_bomb_unfolded_is_bounded_too() -> None:
    # The capture server refuses a line over 1,000 bytes, but a Maildir holds what it is given.
    data = b'Content-Type: multipart/mixed; x="' + b";" * READ_LIMIT + b'"; boundary=b\r\n\r\nx'
    finishes(lambda: open_received(data[:READ_LIMIT], len(data)))
    message, _ = parse_bounded(data[:READ_LIMIT], whole=True)
    assert message.get_boundary() is None
    assert message.get_content_charset() is None


def test_structure_counts_lines_split_by_a_bare_cr() -> None:
    counted = measure_structure(b"A: b\rContent-Type: multipart/x\r--b\r--b\n--b\r\n--b")
    assert (counted.containers, counted.delimiters) == (1, 4)
    folded = measure_structure(b'Content-type :\r\n "Message/rfc822"\r\n\r\n')
    assert folded.containers == 1


@pytest.mark.parametrize(
    ("declared", "used"),
    [
        ("gb2312", "gb2312"),
        ("ISO-2022-JP", "iso2022_jp"),
        ("utf-8", "utf-8"),
        (None, "utf-8"),
        ("punycode", "utf-8"),
        ("idna", "utf-8"),
        ("base64", "utf-8"),
        ("rot13", "utf-8"),
        ("zlib", "utf-8"),
        ("no-such-charset", "utf-8"),
        ("x" * 10_000, "utf-8"),
    ],
)
def test_only_text_encodings_decode_a_part(declared: str | None, used: str) -> None:
    assert text_charset(declared) == used


def test_visible_shows_controls_and_hidden_marks() -> None:
    assert visible("a\r\nb\tc\x00\x1b\x7f") == "a␍␊b\tc␀␛␡"
    assert visible("x\u202egnp.exe\u200b\u2066") == "x<U+202E>gnp.exe<U+200B><U+2066>"
    assert visible("\x85") == "<U+0085>"
    assert visible("abcdef", 3) == "abc… (3 more characters)"


def test_frames_are_renamed_to_nothing() -> None:
    # Chromium connects to a frame's URL before the policy refuses it (test_browser.py).
    html = '<IFRAME src="http://x/">a</iframe><frameset><frame src=y></frameset><iframe/srcdoc=z>'
    assert disarm_frames(html) == (
        '<x-IFRAME src="http://x/">a</x-iframe><x-frameset><x-frame src=y></x-frameset>'
        "<x-iframe/srcdoc=z>"
    )
    assert disarm_frames("<iframely> <framer> frame") == "<iframely> <framer> frame"


@pytest.mark.slow
def test_the_list_shows_the_newest_and_says_how_many_there_are(
    preview: RunningPreview, project: Path
) -> None:
    (project / ".newsletter").mkdir()
    box = mailbox.Maildir(project / ".newsletter" / "mailbox", create=True)
    for n in range(LISTED_LIMIT + 2):
        key = box.add(f"Subject: message {n}\r\n\r\nbody\r\n".encode())
        stamp = 1_700_000_000 + n  # one second apart: newest first is well defined
        os.utime(project / ".newsletter" / "mailbox" / "new" / key, (stamp, stamp))
    page = get(preview, "/mailbox").text
    assert f"The newest {LISTED_LIMIT} of {LISTED_LIMIT + 2} are listed." in page
    subjects = re.findall(r'<td><a href="/mailbox/[^"/]+">(.*?)</a></td>', page)
    assert len(subjects) == LISTED_LIMIT
    assert subjects[0] == f"message {LISTED_LIMIT + 1}"
    assert "message 1<" not in page
