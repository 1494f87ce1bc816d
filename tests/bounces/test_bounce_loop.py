"""The whole loop as an editor runs it: send issue 14 to a list through a real SMTP server, the
readers' servers answer with DSNs, a complaint and an auto-reply into a real IMAP mailbox
(Dovecot), `newsletter bounces` reads them, and issue 15 skips exactly the dead and the
complaining addresses."""

from __future__ import annotations

import email
import mailbox
from pathlib import Path

import pytest

from newsletter.send.mailbox import serve_mailbox
from support.dovecot import Dovecot
from support.dsn import complaint, dsn, vacation
from support.sendcli import environment, newsletter, write_list

HARD, COMPLAINER, AWAY, LATE, FULL = (f"reader{i:05d}@example.com" for i in range(5))


def issue_15(project: Path) -> None:
    text = (project / "issues" / "14.yaml").read_text(encoding="utf-8")
    (project / "issues" / "15.yaml").write_text(
        text.replace("number: 14", "number: 15", 1), encoding="utf-8"
    )


def captured(folder: Path) -> dict[str, bytes]:
    """What the capture server stored, by recipient (Return-Path and Delivered-To included)."""
    box = mailbox.Maildir(folder, create=False)
    found = {}
    for key in box.iterkeys():
        raw = box.get_bytes(key)
        found[box[key]["Delivered-To"]] = raw
    return found


async def send(project: Path, env: dict[str, str], issue: int, folder: Path) -> dict[str, bytes]:
    server = await serve_mailbox(folder, lambda _: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        done = await newsletter(
            ["send", "--issue", str(issue), "--yes"], {**env, **environment(port)}, project
        )
    finally:
        server.close()
        await server.wait_closed()
    assert done.code == 0, done.err
    return captured(folder)


@pytest.mark.slow
async def test_bounces_become_suppressions_and_the_next_issue_skips_them(
    project: Path, dovecot: Dovecot
) -> None:
    readers = write_list(project / "list.csv", 8)
    env = {
        "NEWSLETTER_LISTS__MAIN__PATH": "list.csv",
        "NEWSLETTER_BOUNCES__RETURN_PATH": "bounces@news.example.org",
        "NEWSLETTER_BOUNCES__IMAP": dovecot.url.replace("/INBOX", "/Loop"),
        "NEWSLETTER_BOUNCES__CA_FILE": str(dovecot.ca_file),
        "NEWSLETTER_BOUNCES_PASSWORD": dovecot.password,
    }
    first = await send(project, env, 14, project / "sent-14")
    assert sorted(first) == readers
    # VERP: every envelope sender is bounces+TAG@ with the tag also in a header.
    for raw in first.values():
        head = email.message_from_bytes(raw)
        assert head["Return-Path"] == f"<bounces+{head['X-Newsletter-Tag']}@news.example.org>"

    # This relay quotes nothing of the original: only the return path's tag tells whose it is.
    bare = dsn(first[HARD]).split(b"--dsn\r\nContent-Type: text/rfc822-headers")[0] + b"--dsn--"
    assert b"Message-ID: <" not in bare.split(b"\r\n\r\n", 1)[1]
    returned = [
        bare,
        complaint(first[COMPLAINER]),
        vacation(first[AWAY]),
        dsn(first[LATE], status="4.4.7", action="delayed", diagnostic="451 4.4.7 try later"),
        dsn(first[FULL], status="4.2.2", diagnostic="452 4.2.2 Mailbox full"),
        b"From: a.reader@example.com\r\nSubject: Re: issue 14\r\n\r\nThank you!\r\n",
    ]
    for raw in returned:
        dovecot.append(raw, "Loop")

    done = await newsletter(["bounces"], {**env, **environment(1)}, project)
    assert done.code == 0, done.err
    assert f"hard             {HARD} issue 14 list main 5.1.1: suppressed on main (bounced)" in (
        done.out
    )
    assert f"complaint        {COMPLAINER} issue 14 list main -: suppressed on main" in done.out
    assert "read 6 mail(s): 1 hard, 1 soft, 1 complaint, 1 delayed, 1 auto-reply," in done.out
    assert "1 not understood; 2 address(es) suppressed; 1 left in the mailbox" in done.out
    assert dovecot.count("Loop") == 1  # the reader's thank-you stays for a person
    assert dovecot.count("Newsletter-Processed") == 5

    # The same reports delivered again (a relay retried, or a copy put back): nothing new.
    for raw in returned[:2]:
        dovecot.append(raw, "Loop")
    again = await newsletter(["bounces"], {**env, **environment(1)}, project)
    assert "read 3 mail(s): 2 already counted, 1 not understood; 0 address(es)" in again.out

    listed = await newsletter(["suppressions"], env, project)
    assert f"main  {HARD}  bounced" in listed.out
    assert f"main  {COMPLAINER}  complained" in listed.out

    issue_15(project)
    second = await send(project, env, 15, project / "sent-15")
    assert sorted(second) == sorted(set(readers) - {HARD, COMPLAINER})
    status = await newsletter(["status", "--issue", "15"], env, project)
    assert "skipped   2" in status.out
    assert f"skipped   {HARD}  bounced" in status.out
    assert f"skipped   {COMPLAINER}  complained" in status.out


@pytest.mark.slow
async def test_the_capture_server_bounces_and_bounces_reads_its_maildir(project: Path) -> None:
    """What `make demo` shows: the capture server answers one staging address with a DSN."""
    folder = project / ".newsletter" / "mailbox"
    dead = "proofreader@news.example.org"
    server = await serve_mailbox(folder, lambda _: None, "127.0.0.1", 0, frozenset({dead}))
    port = server.sockets[0].getsockname()[1]
    env = environment(port, NEWSLETTER_BOUNCES__RETURN_PATH="bounces@news.example.org")
    try:
        sent = await newsletter(["send", "--issue", "14", "--list", "staging"], env, project)
    finally:
        server.close()
        await server.wait_closed()
    assert sent.code == 0, sent.err
    assert len(mailbox.Maildir(folder, create=False)) == 3  # two newsletters and one DSN

    done = await newsletter(["bounces", "--maildir", str(folder)], env, project)
    assert done.code == 0, done.err
    assert f"hard             {dead} issue 14 list staging 5.1.1: suppressed on staging" in done.out
    # The captured newsletters are not reports: they stay, counted.
    assert "read 3 mail(s): 1 hard, 2 not understood; 1 address(es) suppressed; 2 left" in done.out
    assert len(mailbox.Maildir(folder, create=False)) == 2
    assert len(mailbox.Maildir(folder / ".Newsletter-Processed", create=False)) == 1
    again = await newsletter(["bounces", "--maildir", str(folder)], env, project)
    assert "read 2 mail(s): 2 not understood; 0 address(es) suppressed" in again.out
