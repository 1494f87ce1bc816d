"""What a stranger can do by mailing the bounce address: issue 14 is really sent to a list of five
through the capture server, then forged reports land in the bounce Maildir and `newsletter
bounces` reads them. Nobody may be suppressed on a report that proves nothing."""

from __future__ import annotations

import hashlib
import mailbox
from pathlib import Path

from newsletter.send.mailbox import serve_mailbox
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


async def test_one_forged_complaint_with_computed_ids_suppresses_nobody(project: Path) -> None:
    readers = write_list(project / "list.csv", 5)
    got = await send_issue_14(project, project / "sent")
    assert sorted(got) == readers
    bounces = project / "bounces"
    mailbox.Maildir(bounces, create=True).add(
        stranger_complaint([computed_id(14, "main", r) for r in readers])
    )
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    done = await newsletter(["bounces", "--maildir", str(bounces)], env, project)
    assert done.code == 0, done.err
    listed = await newsletter(["suppressions"], env, project)
    assert listed.out == "", done.out
    assert "0 address(es) suppressed" in done.out
