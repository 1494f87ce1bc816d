"""The capture server behind `newsletter mailbox`: SMTP on loopback in, a Maildir and one line
per message out; and reading that Maildir back (for the preview).

Addresses given as `bounce` are answered the way a real receiving server answers a dead
mailbox after it took the message: an RFC 3464 report (550 5.1.1) to the envelope sender, filed
in the same Maildir, where `newsletter bounces --maildir` finds it (the demo of the loop).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.errors
import email.header
import email.parser
import email.policy
import email.utils
import mailbox as maildir
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiosmtpd.smtp import SMTP as SMTPServer  # noqa: N811
from aiosmtpd.smtp import Envelope, Session

from newsletter.errors import TransportError


@dataclass(frozen=True)
class Captured:
    sender: str
    recipient: str
    subject: str
    message_id: str
    size: int
    key: str = ""  # the Maildir key, for reading the message back
    received: float = 0.0  # epoch seconds


def captured_messages(directory: Path) -> list[Captured]:
    """What the capture server has stored in `directory`, newest first (for the preview)."""
    if not (directory / "new").is_dir():
        return []
    parser = email.parser.BytesHeaderParser(policy=email.policy.compat32)
    found = []
    for path in [*directory.glob("new/*"), *directory.glob("cur/*")]:
        key = path.name.split(":", 1)[0]
        try:
            with path.open("rb") as handle:
                head = parser.parse(handle)
            stat = path.stat()
        except OSError:
            continue  # removed while we looked
        found.append(
            Captured(
                sender=str(head.get("Return-Path", "")).strip("<> "),
                recipient=str(head.get("Delivered-To", "")),
                subject=_decode(str(head.get("Subject", ""))),
                message_id=str(head.get("Message-ID", "")).strip(),
                size=stat.st_size,
                key=key,
                received=stat.st_mtime,
            )
        )
    return sorted(found, key=lambda c: c.received, reverse=True)


class CaptureHandler:
    """aiosmtpd handler: one Maildir file per recipient, like a real mail drop."""

    def __init__(
        self,
        directory: Path,
        report: Callable[[Captured], None],
        bounce: frozenset[str] = frozenset(),
    ) -> None:
        directory.parent.mkdir(parents=True, exist_ok=True)
        self.box = maildir.Maildir(directory, create=True)
        self.report = report
        self.bounce = frozenset(a.lower() for a in bounce)
        self._headers = email.parser.BytesHeaderParser(policy=email.policy.compat32)

    async def handle_DATA(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTPServer, session: Session, envelope: Envelope
    ) -> str:
        raw = envelope.original_content or b""
        head = self._headers.parsebytes(raw)
        subject = _decode(head.get("Subject", ""))
        message_id = str(head.get("Message-ID", "")).strip()
        for rcpt in envelope.rcpt_tos:
            trace = f"Return-Path: <{envelope.mail_from}>\r\nDelivered-To: {rcpt}\r\n"
            self.box.add(trace.encode() + raw)
            self.report(Captured(envelope.mail_from or "", rcpt, subject, message_id, len(raw)))
            if rcpt.lower() in self.bounce and envelope.mail_from:
                report = _dsn(envelope.mail_from, rcpt, raw)
                self.box.add(
                    f"Return-Path: <>\r\nDelivered-To: {envelope.mail_from}\r\n".encode() + report
                )
                self.report(Captured("", envelope.mail_from, _BOUNCE_SUBJECT, "", len(report)))
        return "250 OK captured"


_BOUNCE_SUBJECT = "Undelivered Mail Returned to Sender"


def _dsn(sender: str, rcpt: str, original: bytes) -> bytes:
    """What a server says later about a mailbox that does not exist (RFC 3464)."""
    head = original.split(b"\r\n\r\n", 1)[0]
    stamp = dt.datetime.now(dt.UTC)
    lines = [
        "From: MAILER-DAEMON@newsletter-mailbox (Mail Delivery System)",
        f"To: <{sender}>",
        f"Subject: {_BOUNCE_SUBJECT}",
        f"Date: {email.utils.format_datetime(stamp)}",
        f"Message-ID: {email.utils.make_msgid('dsn', 'newsletter-mailbox')}",
        "Auto-Submitted: auto-replied",
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=delivery-status; boundary="dsn"',
        "",
        "--dsn",
        "Content-Type: text/plain; charset=us-ascii",
        "",
        f"<{rcpt}>: 550 5.1.1 no such mailbox here (newsletter mailbox --bounce)",
        "",
        "--dsn",
        "Content-Type: message/delivery-status",
        "",
        "Reporting-MTA: dns; newsletter-mailbox",
        "",
        f"Final-Recipient: rfc822; {rcpt}",
        "Action: failed",
        "Status: 5.1.1",
        f"Diagnostic-Code: smtp; 550 5.1.1 <{rcpt}>: Recipient address rejected",
        "",
        "--dsn",
        "Content-Type: text/rfc822-headers",
        "",
        "",
    ]
    return "\r\n".join(lines).encode() + head + b"\r\n\r\n--dsn--\r\n"


def _decode(value: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (ValueError, LookupError, email.errors.HeaderParseError):
        return value


async def serve_mailbox(
    directory: Path,
    report: Callable[[Captured], None],
    host: str = "127.0.0.1",
    port: int = 1025,
    bounce: frozenset[str] = frozenset(),
) -> asyncio.Server:
    """Start the capture server; the caller awaits `serve_forever()` or closes it."""
    handler = CaptureHandler(directory, report, bounce)
    loop = asyncio.get_running_loop()
    try:
        return await loop.create_server(
            lambda: SMTPServer(
                handler, hostname="newsletter-mailbox", enable_SMTPUTF8=True, decode_data=False
            ),
            host,
            port,
        )
    except OSError as exc:
        raise TransportError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="Stop whatever uses the port, or pass another --port (and set [smtp] port).",
        ) from None


def describe_captured(item: Captured) -> str:
    now = dt.datetime.now().strftime("%H:%M:%S")
    return (
        f"{now} {item.sender} -> {item.recipient} {item.size} bytes"
        f" {item.message_id} {item.subject!r}"
    )


async def run_mailbox(
    directory: Path,
    report: Callable[[Captured], None],
    host: str = "127.0.0.1",
    port: int = 1025,
    ready: Callable[[int], None] | None = None,
    bounce: frozenset[str] = frozenset(),
) -> None:
    """Serve until SIGINT or SIGTERM, then close cleanly (messages in progress are kept)."""
    server = await serve_mailbox(directory, report, host, port, bounce)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    try:
        await stop.wait()
    finally:
        server.close()
        await server.wait_closed()
