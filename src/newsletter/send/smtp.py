"""The SMTP client: OutgoingMessages in, one Result per message out.

`Pool` keeps up to N sessions (one SMTP session is strictly serial, so concurrency means several
sessions), opens them lazily (opening.py: aiosmtplib, with the security set explicitly in
[smtp]; a fault in the setup raises TransportError), hands each open session to a wire.Wire for
its mail transactions (pipelined when the server offers it), and recycles each after
`messages_per_connection` messages or any 421. This is the one place that maps what can happen
to a message: a reply to `replies.classify`, a dropped connection or a timeout to RETRY before
the upload and to UNKNOWN during it (the server may have the message).

`send` calls MAIL, RCPT and DATA, and once the server has answered DATA with 354 the caller's
`on_accepted` (which commits `sending`), then uploads the body: only the upload itself is ever
in doubt, and a connection lost before the 354 is a plain retry. Its optional `meanwhile` runs
once the body is written, while the server takes it in: time the caller can use (the engine
builds the next message there) instead of waiting idle for the reply.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import aiosmtplib
from pydantic import SecretStr

from newsletter.errors import TransportError
from newsletter.models import OutgoingMessage
from newsletter.send.opening import Opener
from newsletter.send.replies import Outcome, Result, Scope, classify
from newsletter.send.wire import Reply, Wire, stuffed
from newsletter.settings import SmtpSettings

OnAccepted = Callable[[], None]
Meanwhile = Callable[[], None] | None

_UNSAFE = re.compile(r"[<>\s\x00-\x1f\x7f]")
_CONNECTION_ERRORS = (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError, OSError)
# Each envelope command: the stage its refusal is classified at, and the replies that accept it.
_MAIL: tuple[str, tuple[int, ...]] = ("mail", (250,))
_RCPT: tuple[str, tuple[int, ...]] = ("rcpt", (250, 251))
_DATA: tuple[str, tuple[int, ...]] = ("data", (354,))


class Connection:
    """One SMTP session, opened on first use and recycled after `limit` messages or a 421."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._smtp: aiosmtplib.SMTP | None = None  # the setup: what the server offers
        self._wire: Wire | None = None  # the transactions
        self._pipelining = False
        self._count = 0
        # The command timeout of a message's commands, kept by one watchdog per session
        # instead of a timer and a future per command.
        self._deadline = 0.0  # when the awaited reply is overdue; 0 while nothing is awaited
        self._expired = False
        self._watchdog: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        """Start the clock for the reply to the command about to be sent."""
        self._deadline = time.monotonic() + self._pool.smtp.timeout

    def _watch(self, wire: Wire) -> None:
        if wire is not self._wire:  # that session is gone
            return
        if self._deadline and time.monotonic() > self._deadline:
            # Closing fails the awaited reply with SMTPServerDisconnected, as a timeout does.
            self._expired = True
            wire.close()
            return
        self._watchdog = asyncio.get_running_loop().call_later(
            _watch_interval(self._pool.smtp.timeout), self._watch, wire
        )

    def _lost(self, exc: BaseException) -> str:
        return "Timed out waiting for server response" if self._expired else _text(exc)

    async def _open(self) -> Wire:
        if self._wire is not None and self._wire.is_open:
            return self._wire
        smtp = await self._pool.opener.open()
        try:
            wire = Wire.take_over(smtp)
        except BaseException:
            smtp.close()
            raise
        self._smtp, self._wire = smtp, wire
        self._pipelining = self._pool.smtp.pipelining and smtp.supports_extension("pipelining")
        self._count = 0
        self._deadline = 0.0
        self._expired = False
        self._watch(wire)
        return wire

    async def send(
        self, message: OutgoingMessage, on_accepted: OnAccepted, meanwhile: Meanwhile = None
    ) -> Result:
        try:
            wire = await self._open()
        except aiosmtplib.SMTPResponseException as exc:
            return classify(exc.code, exc.message, "connect")
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException, ssl.SSLError) as exc:
            return Result(Outcome.RETRY, Scope.CONNECTION, None, f"cannot connect: {_text(exc)}")

        try:
            options = self._mail_options(message)
            encoding = "utf-8" if b"SMTPUTF8" in options else "ascii"
            mail = b" ".join([b"MAIL FROM:" + _path(message.sender, encoding), *options])
            rcpt = b"RCPT TO:" + _path(message.recipient, encoding)
        except aiosmtplib.SMTPNotSupported as exc:
            return Result(Outcome.FAILED, Scope.RECIPIENT, None, exc.message)
        except ValueError as exc:
            return Result(Outcome.FAILED, Scope.RECIPIENT, None, str(exc))
        try:
            return await self._transaction(
                wire, message, mail + b"\r\n", rcpt + b"\r\n", on_accepted, meanwhile
            )
        finally:
            self._deadline = 0.0

    async def _transaction(
        self,
        wire: Wire,
        message: OutgoingMessage,
        mail: bytes,
        rcpt: bytes,
        on_accepted: OnAccepted,
        meanwhile: Meanwhile,
    ) -> Result:
        try:
            refused = await self._envelope(wire, mail, rcpt)
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException) as exc:
            # No 354 yet: the server cannot have the message.
            text = self._lost(exc)
            await self.close()
            return Result(
                Outcome.RETRY, Scope.CONNECTION, None, f"connection lost before DATA's 354: {text}"
            )
        if refused is not None:
            return refused
        try:
            on_accepted()
        except BaseException:
            # The server waits for a body that will not come: end the session, not a message.
            await self.close()
            raise
        data = message.data
        body = data if message.smtp_ready and data.endswith(b"\r\n") else stuffed(data)
        try:
            self._arm()
            wire.write(body, b".\r\n")
            if meanwhile is not None:
                meanwhile()
            reply = await wire.reply()
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException) as exc:
            text = self._lost(exc)
            await self.close()
            return Result(
                Outcome.UNKNOWN, Scope.CONNECTION, None, f"connection lost during DATA: {text}"
            )
        if reply.code != 250:
            # A reply to the end of the body: the server has decided, nothing in doubt.
            return await self._refused(classify(reply.code, reply.message, "data"))
        self._count += 1
        if self._count >= self._pool.smtp.messages_per_connection:
            await self.close(polite=True)
        return Result(Outcome.SENT, Scope.RECIPIENT, reply.code, reply.message)

    async def _envelope(self, wire: Wire, mail: bytes, rcpt: bytes) -> Result | None:
        """MAIL, RCPT and DATA up to the server's 354: None then, else the refusal (with the
        transaction ended). One write and one wait when the server offers PIPELINING."""
        steps = ((mail, _MAIL), (rcpt, _RCPT), (b"DATA\r\n", _DATA))
        replies: list[Reply] = []
        if self._pipelining:
            self._arm()
            wire.write(mail, rcpt, b"DATA\r\n")
            replies = [await wire.reply(), await wire.reply(), await wire.reply()]
        else:
            for command, (_, accepted) in steps:
                self._arm()
                wire.write(command)
                replies.append(reply := await wire.reply())
                if reply.code not in accepted:
                    break
        for reply, (_, (stage, accepted)) in zip(replies, steps, strict=False):
            if reply.code not in accepted:
                result = classify(reply.code, reply.message, stage)
                if replies[-1].code == 354:
                    # A refused envelope, yet the server waits for a body: no body, no session.
                    await self.close()
                    return result
                return await self._refused(result)
        return None

    def _mail_options(self, message: OutgoingMessage) -> list[bytes]:
        smtp = self._smtp
        assert smtp is not None
        options = []
        if not message.data.isascii():
            if not smtp.supports_extension("8BITMIME"):
                raise aiosmtplib.SMTPNotSupported(
                    "the message has 8-bit content and the server does not offer 8BITMIME"
                )
            options.append(b"BODY=8BITMIME")
        if not (message.sender.isascii() and message.recipient.isascii()):
            if not smtp.supports_extension("SMTPUTF8"):
                raise aiosmtplib.SMTPNotSupported(
                    "the address is not ASCII and the server does not offer SMTPUTF8"
                )
            options.append(b"SMTPUTF8")
        return options

    async def _refused(self, result: Result) -> Result:
        """The server answered: end the transaction, and the session too after a 421."""
        wire = self._wire
        if result.code == 421 or wire is None:
            await self.close()
            return result
        try:
            self._arm()
            wire.write(b"RSET\r\n")
            if (await wire.reply()).code == 421:
                await self.close()
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException):
            await self.close()
        return result

    async def close(self, *, polite: bool = False) -> None:
        wire, self._wire, self._smtp = self._wire, None, None
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if wire is None:
            return
        if polite and wire.is_open:
            try:
                wire.write(b"QUIT\r\n")
                await asyncio.wait_for(wire.reply(), 5)
            except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException):
                pass
        wire.close()


class Pool:
    """Up to `size` SMTP sessions to the server in `smtp`; `send` waits for a free one."""

    def __init__(
        self,
        smtp: SmtpSettings,
        *,
        password: SecretStr | None,
        size: int,
        helo: str = "localhost",
        root: Path | None = None,
    ) -> None:
        self.smtp = smtp
        self.opener = Opener(smtp, password=password, helo=helo, root=root)
        self._idle: asyncio.Queue[Connection] = asyncio.Queue()
        self._all = [Connection(self) for _ in range(size)]
        for conn in self._all:
            self._idle.put_nowait(conn)

    def __repr__(self) -> str:
        return f"Pool({self.where}, size={len(self._all)})"

    @property
    def where(self) -> str:
        return self.opener.where

    async def check(self) -> None:
        """Open one session now, so a wrong host, certificate or password stops the run before
        any message is planned to go out."""
        conn = await self._idle.get()
        try:
            await conn._open()
        except TransportError:
            raise
        except aiosmtplib.SMTPResponseException as exc:
            raise TransportError(
                f"{self.where}: the server refused us: {exc.code} {exc.message}"
            ) from None
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException, ssl.SSLError) as exc:
            raise TransportError(f"{self.where}: cannot connect: {_text(exc)}") from None
        finally:
            self._idle.put_nowait(conn)

    async def send(
        self, message: OutgoingMessage, on_accepted: OnAccepted, meanwhile: Meanwhile = None
    ) -> Result:
        conn = await self._idle.get()
        try:
            return await conn.send(message, on_accepted, meanwhile)
        finally:
            self._idle.put_nowait(conn)

    async def close(self) -> None:
        await asyncio.gather(*(conn.close(polite=True) for conn in self._all))


def _path(address: str, encoding: str) -> bytes:
    """`<address>` for MAIL/RCPT; anything that could break out of the angle brackets or the
    command line (a control character) is refused."""
    if not address or _UNSAFE.search(address):
        raise ValueError(f"unsafe envelope address {address!r}")
    return b"<" + address.encode(encoding) + b">"


def _watch_interval(timeout: float) -> float:
    """How often a session's watchdog looks: a timeout fires at most a quarter late."""
    return min(max(timeout / 4, 0.01), 1.0)


def _text(exc: BaseException) -> str:
    text = getattr(exc, "message", "") or str(exc)
    return text or type(exc).__name__
