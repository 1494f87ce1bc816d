"""The capture server behind `newsletter mailbox`: SMTP on loopback in, a Maildir and one line
per message out; and reading that Maildir back (for the preview).

Addresses given as `bounce` are answered the way a real receiving server answers a dead
mailbox after it took the message: an RFC 3464 report (550 5.1.1) to the envelope sender, filed
in the same Maildir, where `newsletter bounces --maildir` finds it (the demo of the loop).

Anyone who can reach the port can file a message, so reading the Maildir back is bounded: a key
names a regular file in new/ or cur/ or nothing (no path, no glob, no symlink), a listing reads
HEAD_LIMIT bytes of each of the newest LISTED_LIMIT messages, a message is read up to a limit
the caller gives, and a header is cut to HEADER_TEXT_LIMIT characters before it is decoded.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.errors
import email.header
import email.message
import email.parser
import email.policy
import email.utils
import errno
import mailbox as maildir
import os
import re
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiosmtpd.smtp import SMTP as SMTPServer  # noqa: N811
from aiosmtpd.smtp import Envelope, Session

from newsletter.errors import TransportError
from newsletter.state.statefiles import private_folder


@dataclass(frozen=True)
class Captured:
    sender: str
    recipient: str
    subject: str
    message_id: str
    size: int
    key: str = ""  # the Maildir key, for reading the message back
    received: float = 0.0  # epoch seconds


HEAD_LIMIT = 64 * 1024  # bytes of each message read to list it
LISTED_LIMIT = 500  # newest messages listed
HEADER_TEXT_LIMIT = 4096  # characters of a header decoded (decoding is superlinear)
_KEY_LIMIT = 255  # a file name


def captured_messages(directory: Path, newest: int = LISTED_LIMIT) -> list[Captured]:
    """The `newest` messages the capture server has stored in `directory`, newest first."""
    entries = _captured_files(directory)
    entries.sort(key=lambda entry: entry[2].st_mtime, reverse=True)
    parser = email.parser.BytesHeaderParser(policy=email.policy.compat32)
    found = []
    for key, path, stat in entries[:newest]:
        data = _read_head(path, HEAD_LIMIT)
        if data is None:
            continue  # removed while we looked
        head = parser.parsebytes(data)
        found.append(
            Captured(
                sender=_header(head, "Return-Path").strip("<> "),
                recipient=_header(head, "Delivered-To"),
                subject=decode_header_text(_header(head, "Subject")),
                message_id=_header(head, "Message-ID").strip(),
                size=stat.st_size,
                key=key,
                received=stat.st_mtime,
            )
        )
    return found


def count_captured(directory: Path) -> int:
    """How many messages `directory` holds (a listing shows only the newest)."""
    return len(_captured_files(directory))


def read_captured(directory: Path, key: str, limit: int) -> tuple[bytes, int] | None:
    """The first `limit` bytes of the message stored under `key` and its whole size; None when
    `key` names no message of `directory` (a path, a dot file, a glob, a symlink included)."""
    path = captured_path(directory, key)
    if path is None:
        return None
    try:
        size = path.stat(follow_symlinks=False).st_size
    except OSError:
        return None
    data = _read_head(path, limit)
    return None if data is None else (data, size)


def captured_path(directory: Path, key: str) -> Path | None:
    """The regular file in new/ or cur/ whose Maildir key is `key`, compared name by name."""
    if not key or len(key) > _KEY_LIMIT or key.startswith(".") or "/" in key or "\0" in key:
        return None
    for found, path, _ in _captured_files(directory):
        if found == key:
            return path
    return None


def _captured_files(directory: Path) -> list[tuple[str, Path, os.stat_result]]:
    """(key, path, stat) of each regular file in new/ and cur/; a file named `KEY:2,FLAGS` in
    cur/ has the key KEY (the Maildir convention)."""
    found = []
    for folder in (directory / "new", directory / "cur"):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                        continue
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed while we looked
                    found.append((entry.name.split(":", 1)[0], Path(entry.path), stat))
        except OSError:
            continue  # no such folder (yet)
    return found


def _read_head(path: Path, limit: int) -> bytes | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def raw_headers(head: email.message.Message) -> list[tuple[str, str]]:
    """(name, value) of each header as the message has it, raw 8-bit bytes (SMTPUTF8 mail) read
    as UTF-8 and each value cut to HEADER_TEXT_LIMIT characters; nothing decoded yet."""
    return [
        (_as_text(name), _as_text(value[:HEADER_TEXT_LIMIT])) for name, value in head.raw_items()
    ]


def _as_text(value: str) -> str:
    # The parser keeps 8-bit bytes surrogate-escaped: back to bytes, then UTF-8.
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _header(head: email.message.Message, name: str) -> str:
    wanted = name.lower()
    return next((v for n, v in raw_headers(head) if n.lower() == wanted), "")


class CaptureHandler:
    """aiosmtpd handler: one Maildir file per recipient, like a real mail drop."""

    def __init__(
        self,
        directory: Path,
        report: Callable[[Captured], None],
        bounce: frozenset[str] = frozenset(),
    ) -> None:
        private_folder(directory.parent)  # the state folder
        self.box = maildir.Maildir(directory, create=True)
        self.report = report
        self.bounce = frozenset(a.lower() for a in bounce)
        self._headers = email.parser.BytesHeaderParser(policy=email.policy.compat32)

    async def handle_DATA(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTPServer, session: Session, envelope: Envelope
    ) -> str:
        raw = envelope.original_content or b""
        head = self._headers.parsebytes(raw)
        subject = decode_header_text(_header(head, "Subject"))
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


def decode_header_text(value: str) -> str:
    """A header's text with its folds undone and its encoded words (RFC 2047) decoded; a value
    that does not decode is kept as it is. Controls stay: showing them is the reader's job."""
    value = _UNFOLD.sub("", value[:HEADER_TEXT_LIMIT])
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (ValueError, LookupError, email.errors.HeaderParseError):
        return value


_UNFOLD = re.compile(r"\r?\n(?=[ \t])")


async def serve_mailbox(
    directory: Path,
    report: Callable[[Captured], None],
    host: str = "127.0.0.1",
    port: int = 1025,
    bounce: frozenset[str] = frozenset(),
) -> asyncio.Server:
    """Start the capture server; the caller awaits `serve_forever()` or closes it. A port it
    cannot listen on is a TransportError saying why, and leaves no Maildir behind."""
    loop = asyncio.get_running_loop()
    handler: CaptureHandler | None = None

    def session() -> SMTPServer:
        assert handler is not None  # set before the server starts serving
        return SMTPServer(
            handler, hostname="newsletter-mailbox", enable_SMTPUTF8=True, decode_data=False
        )

    try:
        server = await loop.create_server(session, host, port, start_serving=False)
    except OSError as exc:
        raise TransportError(
            f"cannot listen on {host}:{port}: {listen_failure(exc)}",
            hint="Stop the program that holds the port, or pass another --port (0 picks a free"
            " one; the first line names it) and set [smtp] port (NEWSLETTER_SMTP__PORT) to it.",
        ) from None
    try:
        handler = CaptureHandler(directory, report, bounce)
    except BaseException:
        server.close()
        raise
    await server.start_serving()
    return server


def listen_failure(exc: OSError) -> str:
    """Why a listening socket could not be made, in words (asyncio wraps the errno in a
    sentence that names the address a second time)."""
    if isinstance(exc, socket.gaierror):
        return f"no such address ({exc.strerror})"
    reason = _LISTEN_FAILURES.get(exc.errno or 0)
    if reason is not None:
        return reason
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


_LISTEN_FAILURES = {
    errno.EADDRINUSE: "the port is busy: another program listens there",
    errno.EACCES: "permission denied (a port below 1024 needs privileges)",
    errno.EADDRNOTAVAIL: "this machine has no such address",
}


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
