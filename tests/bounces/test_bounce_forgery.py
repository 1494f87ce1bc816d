"""What a stranger can do by mailing the bounce address: issue 14 is really sent to a list of five
through the capture server, then forged reports land in the bounce Maildir and `newsletter
bounces` reads them. Nobody may be suppressed on a report that proves nothing."""

from __future__ import annotations

import email
import hashlib
import mailbox
import re
import sqlite3
from pathlib import Path

import pytest

from newsletter.send.mailbox import serve_mailbox
from support.dsn import dsn
from support.providers import Provider
from support.sendcli import environment, newsletter, write_list

DOMAIN = "news.example.org"  # the sender's domain in the shipped newsletter.toml


def computed_id(issue: int, list_name: str, address: str) -> str:
    """The Message-ID anyone could compute before it was keyed: the issue number is public in
    the archive and the list name defaults to `main`."""
    seed = f"{issue}\n{list_name}\n{address}".encode()
    return f"<{hashlib.sha256(seed).hexdigest()[:32]}@{DOMAIN}>"


def stranger_complaint(message_ids: list[str], rcpt: str = "") -> bytes:
    """An ARF abuse report from a stranger's own address: the first ID as the quoted original,
    every ID in References."""
    lines = [
        "From: Feedback Loop <fbl@stranger.example>",
        f"To: digest@{DOMAIN}",
        "Subject: Abuse report",
        "Message-ID: <forged-1@stranger.example>",
        f"References: {' '.join(message_ids)}",
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=feedback-report; boundary="arf"',
        "",
        "--arf",
        "Content-Type: text/plain",
        "",
        "This is an email abuse report.",
        "",
        "--arf",
        "Content-Type: message/feedback-report",
        "",
        "Feedback-Type: abuse",
        "Version: 1",
        f"Original-Rcpt-To: <{rcpt}>" if rcpt else "Original-Rcpt-To: <>",
        "",
        "--arf",
        "Content-Type: text/rfc822-headers",
        "",
        f"From: digest@{DOMAIN}",
        f"Message-ID: {message_ids[0]}",
        "Subject: Issue 14",
        "",
        "--arf--",
        "",
    ]
    return "\r\n".join(lines).encode()


async def send_issue_14(project: Path, folder: Path) -> dict[str, bytes]:
    """Issue 14 to list.csv through the capture server; what each reader got, by address."""
    server = await serve_mailbox(folder, lambda _: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = environment(port, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    try:
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    finally:
        server.close()
        await server.wait_closed()
    assert done.code == 0, done.err
    box = mailbox.Maildir(folder, create=False)
    return {str(box[key]["Delivered-To"]): box.get_bytes(key) for key in box.iterkeys()}


def message_ids(got: dict[str, bytes], readers: list[str]) -> list[str]:
    return [str(email.message_from_bytes(got[r])["Message-ID"]) for r in readers]


def left(folder: Path) -> int:
    return len(mailbox.Maildir(folder, create=False))


@pytest.mark.slow
async def test_one_forged_complaint_with_computed_ids_suppresses_nobody(project: Path) -> None:
    """Issue 18: before, this one mail suppressed every address of the list."""
    readers = write_list(project / "list.csv", 5)
    got = await send_issue_14(project, project / "sent")
    assert sorted(got) == readers
    computed = [computed_id(14, "main", r) for r in readers]
    assert not set(computed) & set(message_ids(got, readers))  # keyed: nobody can compute them
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(stranger_complaint(computed))
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    done = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert done.code == 0, done.err
    assert "read 1 mail(s): 1 no matching send; 0 address(es) suppressed; 1 left" in done.out
    listed = await newsletter(["suppressions"], env, project)
    assert listed.out == "", done.out
    assert left(bounces) == 1


@pytest.mark.slow
async def test_a_stranger_quoting_real_ids_is_held_for_review(project: Path) -> None:
    """Message-IDs leak (a forwarded issue, a reply quoting References): one that is real is
    still no proof. The mail is held, shown, counted and left; at most one row is named."""
    readers = write_list(project / "list.csv", 5)
    got = await send_issue_14(project, project / "sent")
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(stranger_complaint(message_ids(got, readers)))
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    done = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert done.code == 0, done.err
    assert (
        f"held for review  {readers[0]} issue 14 list main -: complaint not applied:"
        " fbl@stranger.example does not speak for" in done.out
    )
    assert "read 1 mail(s): 1 held for review; 0 address(es) suppressed; 1 left" in done.out
    assert "1 report(s) held for review" in done.err
    assert (await newsletter(["suppressions"], env, project)).out == ""
    assert left(bounces) == 1
    status = await newsletter(["status", "--issue", "14"], env, project)
    assert status.out.splitlines()[-1] == (
        "1 bounce report(s) held for review: see `newsletter bounces --held`"
    )

    again = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert "1 held for review; 0 address(es) suppressed; 1 left" in again.out
    held = await newsletter(["bounces", "--held"], env, project)
    assert held.code == 0, held.err
    (line,) = held.out.splitlines()  # one mail, one row, however many IDs it quoted
    assert re.match(rf"\s+1  \S+  complaint  {readers[0]}  issue 14 list main  from", line)
    assert "fbl@stranger.example" in line
    assert "1 report(s) held for review: --accept ID applies one" in held.err

    dismissed = await newsletter(["bounces", "--dismiss", "1"], env, project)
    assert dismissed.code == 0, dismissed.err
    filed = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert "read 1 mail(s): 1 dismissed; 0 address(es) suppressed; 0 left" in filed.out
    assert left(bounces) == 0
    assert (
        "held for review" not in (await newsletter(["status", "--issue", "14"], env, project)).out
    )
    assert (await newsletter(["suppressions"], env, project)).out == ""
    unknown = await newsletter(["bounces", "--accept", "1"], env, project)
    assert unknown.code != 0
    assert "no report held for review has id 1" in unknown.err


@pytest.mark.slow
async def test_the_editor_accepts_a_held_report(project: Path) -> None:
    readers = write_list(project / "list.csv", 2)
    got = await send_issue_14(project, project / "sent")
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(stranger_complaint(message_ids(got, readers)[1:]))
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    accepted = await newsletter(["bounces", "--accept", "1"], env, project)
    assert accepted.code == 0, accepted.err
    assert f"accepted 1: complaint {readers[1]}: suppressed on main (complained)" in accepted.out
    listed = await newsletter(["suppressions"], env, project)
    assert [line.split()[2] for line in listed.out.splitlines()] == [readers[1]]
    filed = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert "read 1 mail(s): 1 already counted; 0 address(es) suppressed; 0 left" in filed.out
    assert (await newsletter(["bounces", "--held"], env, project)).out == ""


@pytest.mark.slow
async def test_the_readers_own_mail_system_proves_itself_and_acts_on_one_row(
    project: Path, provider: Provider
) -> None:
    """A DSN from example.com's mail system, DKIM-signed (key on a loopback DNS), quoting every
    reader's Message-ID: the one it is about is suppressed, nobody else."""
    readers = write_list(project / "list.csv", 5)
    got = await send_issue_14(project, project / "sent")
    report = dsn(got[readers[2]], sender_address="MAILER-DAEMON@mx.example.com")
    references = f"References: {' '.join(message_ids(got, readers))}\r\n".encode()
    report = report.replace(b"Auto-Submitted:", references + b"Auto-Submitted:", 1)
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(provider.sign(report, "example.com"))
    with (project / "newsletter.toml").open("a", encoding="utf-8") as config:
        config.write(f'\n[check]\nnameservers = ["{provider.nameserver}"]\n')
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    done = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert done.code == 0, done.err
    assert f"hard             {readers[2]} issue 14 list main 5.1.1: suppressed on main" in done.out
    assert "read 1 mail(s): 1 hard; 1 address(es) suppressed; 0 left" in done.out
    listed = await newsletter(["suppressions"], env, project)
    assert [line.split()[2] for line in listed.out.splitlines()] == [readers[2]]


@pytest.mark.slow
async def test_a_held_report_past_the_window_is_deleted(project: Path) -> None:
    """[privacy] held_retention_days: the outbox's copy of a stranger's report goes; its mail,
    still in the bounce mailbox, is held again as new when the mailbox is next read."""
    readers = write_list(project / "list.csv", 2)
    got = await send_issue_14(project, project / "sent")
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(stranger_complaint(message_ids(got, readers)))
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    with sqlite3.connect(project / ".newsletter" / "outbox.sqlite3") as db:
        db.execute("UPDATE held_reports SET created_at = '2020-01-01T00:00:00.000+00:00'")
    db.close()
    held = await newsletter(["bounces", "--held"], env, project)
    assert held.code == 0, held.err
    assert held.out == ""
    assert "1 report(s) held for review deleted after 90 days" in held.err
    assert "0 report(s) held for review" in held.err
    assert (
        "held for review" not in (await newsletter(["status", "--issue", "14"], env, project)).out
    )

    again = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert "deleted after" not in again.err
    assert "read 1 mail(s): 1 held for review; 0 address(es) suppressed; 1 left" in again.out
    (line,) = (await newsletter(["bounces", "--held"], env, project)).out.splitlines()
    assert re.match(rf"\s+2  \S+  complaint  {readers[0]}  ", line)
