"""DATA for one message: its bytes in, the server's final reply out, as fast as the wire allows.

The only code that reaches into aiosmtplib's internals (`SMTP.protocol.write` and
`protocol.read_response`): smtp.data() scans the whole body twice with regexes, and the
message factory already guarantees what those scans check. pyproject.toml bounds aiosmtplib's
version, and tests/send/test_upload.py fails loudly if these internals change.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import aiosmtplib

from newsletter.models import OutgoingMessage


async def upload(
    smtp: aiosmtplib.SMTP,
    message: OutgoingMessage,
    meanwhile: Callable[[], None] | None = None,
    arm: Callable[[], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> aiosmtplib.SMTPResponse:
    """DATA, then `on_start` once the server has answered 354, then the body.

    Until the 354 the server cannot have the message, so a connection lost before it is a plain
    retry; `on_start` marks where the in-doubt window opens. The body goes out without
    smtp.data()'s two regex passes over it: a message whose builder
    vouches for it (`smtp_ready`: CRLF only, no line starting with ".") as it is, any other one
    with its line ends made CRLF and dot-stuffed here. Same wire bytes, same errors and the same
    close-on-timeout as smtp.data()."""
    protocol = smtp.protocol
    if protocol is None:
        raise aiosmtplib.SMTPServerDisconnected("Connection lost")
    # With `arm`, the caller's watchdog times each reply; without it, aiosmtplib does.
    timeout = None if arm else smtp.timeout
    if arm:
        arm()
    start = await smtp.execute_command(b"DATA", timeout=timeout)
    if start.code != 354:
        raise aiosmtplib.SMTPDataError(start.code, start.message)
    if on_start is not None:
        on_start()
    data = message.data
    body = data if message.smtp_ready and data.endswith(b"\r\n") else _stuffed(data)
    try:
        if arm:
            arm()
        protocol.write(body + b".\r\n")
        if meanwhile is not None:
            meanwhile()
        reply = await protocol.read_response(timeout=timeout)
    except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
        smtp.close()
        raise
    if reply.code != 250:
        raise aiosmtplib.SMTPDataError(reply.code, reply.message)
    return reply


def _stuffed(data: bytes) -> bytes:
    """CRLF line ends, a final one, and every line that starts with "." doubled (RFC 5321)."""
    if not _crlf_only(data):
        data = re.sub(rb"\r\n|\r|\n", b"\r\n", data)
    body = data if data.endswith(b"\r\n") else data + b"\r\n"
    body = body.replace(b"\r\n.", b"\r\n..")
    return b"." + body if body.startswith(b".") else body


def _crlf_only(data: bytes) -> bool:
    lines = data.count(b"\n")
    return lines == data.count(b"\r\n") and lines == data.count(b"\r")
