"""DATA for one message: its bytes in, the server's final reply out, as fast as the wire allows.

The only code that reaches into aiosmtplib's internals (`SMTP.protocol.write` and
`protocol.read_response`): smtp.data() scans the whole body twice with regexes, and the
message factory already guarantees what those scans check. pyproject.toml bounds aiosmtplib's
version, and tests/send/test_upload.py fails loudly if these internals change.
"""

from __future__ import annotations

from collections.abc import Callable

import aiosmtplib

from newsletter.models import OutgoingMessage


async def upload(
    smtp: aiosmtplib.SMTP,
    message: OutgoingMessage,
    meanwhile: Callable[[], None] | None = None,
    arm: Callable[[], None] | None = None,
) -> aiosmtplib.SMTPResponse:
    """DATA without smtp.data()'s two regex passes over the whole body. A message whose builder
    vouches for it (`smtp_ready`: CRLF only, no line starting with ".") goes out as it is; any
    other CRLF-only message is dot-stuffed by one bytes.replace after three counts; anything
    else goes through smtp.data(). Same wire bytes, same errors and the same close-on-timeout
    either way."""
    protocol = smtp.protocol
    data = message.data
    ready = message.smtp_ready and data.endswith(b"\r\n")
    if protocol is None or not (ready or _crlf_only(data)):
        return await smtp.data(data)
    # With `arm`, the caller's watchdog times each reply; without it, aiosmtplib does.
    timeout = None if arm else smtp.timeout
    if arm:
        arm()
    start = await smtp.execute_command(b"DATA", timeout=timeout)
    if start.code != 354:
        raise aiosmtplib.SMTPDataError(start.code, start.message)
    body = data
    if not ready:
        body = data if data.endswith(b"\r\n") else data + b"\r\n"
        body = body.replace(b"\r\n.", b"\r\n..")
        if body.startswith(b"."):
            body = b"." + body
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


def _crlf_only(data: bytes) -> bool:
    lines = data.count(b"\n")
    return lines == data.count(b"\r\n") and lines == data.count(b"\r")
