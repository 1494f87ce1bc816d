"""One SMTP session's wire once aiosmtplib has opened it: command bytes in, replies out in order.

aiosmtplib sets the session up (TLS or STARTTLS, EHLO, AUTH); `Wire.take_over` then moves its
transport to this protocol for the mail transactions. aiosmtplib's own protocol drops a reply
that arrives while an earlier one still waits to be read, so it cannot pipeline; a Wire keeps
every reply, so MAIL, RCPT and DATA can go out in one write when the server offers PIPELINING
(RFC 2920): two round trips less per message, for us and for the server.

A lost connection, an EOF, a reply that is not SMTP or one over the caps below raises
aiosmtplib's SMTPServerDisconnected, and a reply overdue (`expire`) its SMTPReadTimeoutError, so
faults.py maps every failure of a session the same way, whichever code spoke to the server.
What a server sends is bounded: a line, a reply (its bytes and its lines) and the replies not
read yet, so one that never ends a reply cannot fill memory.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import NamedTuple

import aiosmtplib

from newsletter.send.replies import reply_text

# A reply line is at most 512 octets (RFC 5321 4.5.3.1.5), and the longest real reply, an
# EHLO's extensions, a few dozen short lines. More, or a reply with no end in sight, is not a
# server we can talk to. The byte cap is aiosmtplib's for the replies it reads at setup.
_MAX_LINE = 4096
_MAX_REPLY = 32768
_MAX_LINES = 100
# At most five commands await a reply at once (a body, then the next MAIL, RCPT and DATA, or
# a QUIT): more replies than that in hand answer commands never sent.
_MAX_UNREAD = 16


class Reply(NamedTuple):
    code: int
    message: str


class Wire(asyncio.Protocol):
    """The protocol of one open session: `write` commands, `await reply()` once per command."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._buffer = bytearray()
        self._lines: list[bytes] = []  # the lines of a multi-line reply read so far
        self._size = 0  # their bytes
        self._replies: deque[Reply] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: aiosmtplib.SMTPException | None = None

    @classmethod
    def take_over(cls, smtp: aiosmtplib.SMTP) -> Wire:
        """The transport of `smtp`'s open session, moved to a new Wire. `smtp` must not send
        anything more (its replies would come here)."""
        transport = smtp.transport
        if transport is None or transport.is_closing():
            raise aiosmtplib.SMTPServerDisconnected("Connection lost")
        wire = cls(transport)  # type: ignore[arg-type]
        transport.set_protocol(wire)
        return wire

    @property
    def is_open(self) -> bool:
        return self._error is None and not self._transport.is_closing()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._error is not None:
            return
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) != -1:
            line = bytes(buffer[start : end + 1])
            start = end + 1
            if len(line) > _MAX_LINE or not line[:3].isdigit() or line[3:4] not in b" -\r\n":
                self._fail(f"not an SMTP reply: {line[:80]!r}")
                return
            self._lines.append(line)
            self._size += len(line)
            if len(self._lines) > _MAX_LINES or self._size > _MAX_REPLY:
                self._fail(
                    f"a reply over {_MAX_LINES} lines or {_MAX_REPLY} bytes: not an SMTP server"
                )
                return
            if line[3:4] != b"-":
                self._replies.append(_reply(self._lines))
                self._lines, self._size = [], 0
                if len(self._replies) > _MAX_UNREAD:
                    # Which reply answers which command is lost: none of them counts.
                    self._replies.clear()
                    self._fail(f"over {_MAX_UNREAD} replies to commands never sent")
                    return
        del buffer[:start]
        if len(buffer) > _MAX_LINE:
            self._fail("a reply line with no end")
            return
        if self._replies:
            self._wake()

    def eof_received(self) -> bool:
        self._fail("Unexpected EOF received")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("Connection lost", exc)

    # -- the session --------------------------------------------------------------------------

    def write(self, data: bytes, *more: bytes) -> None:
        if self._error is not None:
            raise self._error
        if self._transport.is_closing():
            raise aiosmtplib.SMTPServerDisconnected("Connection lost")
        if more:
            self._transport.writelines([data, *more])
        else:
            self._transport.write(data)

    async def reply(self) -> Reply:
        """The next reply, in the order the commands were written."""
        while not self._replies:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._replies.popleft()

    def close(self) -> None:
        self._transport.close()

    def expire(self) -> None:
        """The awaited reply is overdue: the session is closed, and the wait fails with a
        timeout (not a lost connection)."""
        self._fail_with(aiosmtplib.SMTPReadTimeoutError("Timed out waiting for server response"))

    def _fail(self, why: str, cause: BaseException | None = None) -> None:
        error = aiosmtplib.SMTPServerDisconnected(why)
        error.__cause__ = cause
        self._fail_with(error)

    def _fail_with(self, error: aiosmtplib.SMTPException) -> None:
        if self._error is None:
            self._error = error
        self._transport.close()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _reply(lines: list[bytes]) -> Reply:
    text = b"\n".join(line[4:].strip(b" \t\r\n") for line in lines)
    return Reply(int(lines[-1][:3]), reply_text(text))


def stuffed(data: bytes) -> bytes:
    """CRLF line ends, a final one, and every line that starts with "." doubled (RFC 5321)."""
    if not _crlf_only(data):
        data = re.sub(rb"\r\n|\r|\n", b"\r\n", data)
    body = data if data.endswith(b"\r\n") else data + b"\r\n"
    body = body.replace(b"\r\n.", b"\r\n..")
    return b"." + body if body.startswith(b".") else body


def _crlf_only(data: bytes) -> bool:
    lines = data.count(b"\n")
    return lines == data.count(b"\r\n") and lines == data.count(b"\r")
