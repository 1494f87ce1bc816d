"""What anyone can put in the bounce mailbox, read through a real Dovecot and a Maildir: a mail
nested thousands of multiparts deep, and a 20 MB bounce. Each mail is judged on its own: the
one that cannot be parsed is "not understood" and left, the run goes on, and no mail is read
past MAX_MAIL_BYTES."""

from __future__ import annotations

import mailbox
import os
import re
from pathlib import Path

import pytest

from newsletter.bounces.inbox import MAX_MAIL_BYTES, MaildirInbox, open_inbox
from newsletter.bounces.kinds import Kind
from newsletter.bounces.reports import read_report
from newsletter.config.settings import load_settings
from newsletter.send.mailbox import serve_mailbox
from support.dovecot import Dovecot
from support.dsn import dsn
from support.sendcli import environment, newsletter, write_list

DEPTH = 3000
BIG = 20 * 1024 * 1024


def nested(depth: int = DEPTH) -> bytes:
    """A mail whose every part is a multipart holding the next one."""
    head = b"From: someone@stranger.example\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i)
        for i in range(depth)
    )
    closing = b"".join(b"\r\n--b%d--\r\n" % i for i in reversed(range(depth)))
    return head + opening + b"Content-Type: text/plain\r\n\r\nhi" + closing


def with_attachment(report: bytes, size: int = BIG) -> bytes:
    """`report` with a `size`-byte attachment after its report parts (a relay returning a
    whole message, attachments and all)."""
    line = b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n"
    blob = line * (size // len(line))
    part = (
        b"--dsn\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n"
    )
    return report.replace(b"--dsn--", part + b"\r\n" + blob + b"--dsn--")


@pytest.mark.slow
def test_a_mail_that_cannot_be_parsed_is_a_report_not_an_exception() -> None:
    report = read_report(nested())
    assert report.kind is Kind.UNKNOWN
    assert report.problem == "cannot be parsed: its parts are nested too deep"
    assert (report.sender, report.subject) == ("someone@stranger.example", "deep")


async def sent_with_verp(project: Path, env: dict[str, str]) -> dict[str, bytes]:
    """Issue 14 to a list of two through the capture server, with VERP; by recipient."""
    folder = project / "sent"
    server = await serve_mailbox(folder, lambda _: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        done = await newsletter(
            ["send", "--issue", "14", "--yes"], {**env, **environment(port)}, project
        )
    finally:
        server.close()
        await server.wait_closed()
    assert done.code == 0, done.err
    box = mailbox.Maildir(folder, create=False)
    return {str(box[k]["Delivered-To"]): box.get_bytes(k) for k in box.iterkeys()}


def hostile_mails(got: dict[str, bytes]) -> list[bytes]:
    """The deep mail first: every mail after it must still be read."""
    small, big = sorted(got)
    return [nested(), with_attachment(dsn(got[big])), dsn(got[small])]


def check_run(out: str, got: dict[str, bytes]) -> None:
    small, big = sorted(got)
    assert re.search(
        r"not understood +from someone@stranger.example 'deep': cannot be parsed: its"
        r" parts are nested too deep",
        out,
    ), out
    assert f"hard             {big} issue 14 list main 5.1.1: suppressed" in out
    assert f"hard             {small} issue 14 list main 5.1.1: suppressed" in out
    assert "read 3 mail(s): 2 hard, 1 not understood; 2 address(es) suppressed; 1 left" in out


@pytest.fixture
def env(project: Path) -> dict[str, str]:
    write_list(project / "list.csv", 2)
    return {
        "NEWSLETTER_LISTS__MAIN__PATH": "list.csv",
        "NEWSLETTER_BOUNCES__RETURN_PATH": "bounces@news.example.org",
    }


@pytest.mark.slow
async def test_maildir_deep_and_huge_mails(project: Path, env: dict[str, str]) -> None:
    got = await sent_with_verp(project, env)
    folder = project / "bounces"
    box = mailbox.Maildir(folder, create=True)
    mails = hostile_mails(got)
    # Named so that they are read in this order (the deep one first), as mail servers name
    # theirs: a time, then something unique.
    keys = [f"100000000{i}.M0P0Q{i}.test" for i in range(len(mails))]
    for key, raw in zip(keys, mails, strict=True):
        (folder / "new" / key).write_bytes(raw)
    inbox = MaildirInbox(folder, "Newsletter-Processed")
    sizes = [len(mail.raw) for mail in inbox.mails()]
    assert sizes[1] == MAX_MAIL_BYTES  # the 20 MB mail: only its first MiB is read
    assert max(sizes[0], sizes[2]) < MAX_MAIL_BYTES

    done = await newsletter(
        ["bounces", "--maildir", str(folder)], {**env, **environment(1)}, project
    )
    assert done.code == 0, done.err
    check_run(done.out, got)
    assert box.keys() == [keys[0]]  # the deep mail stays where it was
    processed = folder / ".Newsletter-Processed"
    moved = sorted(p.stat().st_size for p in (processed / "new").iterdir())
    assert moved[1] == len(mails[1]) > BIG  # filed whole, as it came
    again = await newsletter(
        ["bounces", "--maildir", str(folder)], {**env, **environment(1)}, project
    )
    assert "read 1 mail(s): 1 not understood; 0 address(es) suppressed; 1 left" in again.out


@pytest.mark.slow
async def test_imap_deep_and_huge_mails(
    project: Path, env: dict[str, str], dovecot: Dovecot
) -> None:
    got = await sent_with_verp(project, env)
    env = {
        **env,
        "NEWSLETTER_BOUNCES__IMAP": dovecot.url.replace("/INBOX", "/Hostile"),
        "NEWSLETTER_BOUNCES__CA_FILE": str(dovecot.ca_file),
        "NEWSLETTER_BOUNCES__PROCESSED": "Hostile-Processed",
        "NEWSLETTER_BOUNCES_PASSWORD": dovecot.password,
    }
    mails = hostile_mails(got)
    for raw in mails:
        dovecot.append(raw, "Hostile")
    inbox = open_inbox(load_settings(project / "newsletter.toml", environ=env))
    try:
        sizes = [len(mail.raw) for mail in inbox.mails()]
    finally:
        inbox.close()
    assert sizes[1] == MAX_MAIL_BYTES  # a partial FETCH: the rest never crosses the wire
    assert max(sizes[0], sizes[2]) < MAX_MAIL_BYTES

    done = await newsletter(["bounces"], {**env, **environment(1)}, project)
    assert done.code == 0, done.err
    check_run(done.out, got)
    assert dovecot.count("Hostile") == 1
    with dovecot.client() as imap:
        imap.select('"Hostile-Processed"', readonly=True)
        _typ, data = imap.fetch("1:*", "(RFC822.SIZE)")
    filed = sorted(int(m) for m in re.findall(rb"RFC822.SIZE (\d+)", b" ".join(data)))
    crlf = mails[1].replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    assert filed[1] == len(crlf)  # moved whole
    again = await newsletter(["bounces"], {**env, **environment(1)}, project)
    assert "read 1 mail(s): 1 not understood; 0 address(es) suppressed; 1 left" in again.out


def test_a_maildir_mail_taken_meanwhile_is_skipped(tmp_path: Path) -> None:
    box = mailbox.Maildir(tmp_path / "box", create=True)
    box.add(b"Subject: one\r\n\r\nx\r\n")
    box.add(b"Subject: two\r\n\r\ny\r\n")
    reading = MaildirInbox(tmp_path / "box", "").mails()
    first = next(reading)
    for name in os.listdir(tmp_path / "box" / "new"):
        if f"new/{name}" != first.ref:
            os.remove(tmp_path / "box" / "new" / name)  # another reader took it
    assert list(reading) == []
