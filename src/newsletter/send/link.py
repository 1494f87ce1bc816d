"""One SMTP session to one relay: OutgoingMessages in, one Result per message out.

A `Link` opens lazily (opening.py: aiosmtplib sets it up, with the relay's security set
explicitly, and hands it to a wire.Wire for its mail transactions, pipelined when the server
offers it) and is recycled after `messages_per_connection` messages or any 421. What it meets
(a reply, a dropped connection, a timeout, a setup that failed) faults.py turns into the
message's Result, or into the TransportError of a setup fault; here it is only caught.

`send` calls MAIL, RCPT and DATA, and once the server has answered DATA with 354 awaits the
caller's `on_accepted` (the engine's commit of `sending`), then uploads the body: only the upload
itself is ever in doubt, and a connection lost before the 354 is a plain retry. Its optional
`meanwhile` runs after `on_accepted`, just before the body goes out, and may return the message
this link sends next (the engine builds it there): with PIPELINING its MAIL, RCPT and DATA go
out in the same write, behind the body (RFC 2920 lets a group start with the message content), so a
message costs one round trip, not two. That message's own `send` then starts from the replies; its
body still waits for its 354 and its `on_accepted`. An announced message that is not sent next (the
run stopped) ends the session: the server waits for a body that will not come.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

import aiosmtplib

from newsletter.models import OutgoingMessage
from newsletter.send import faults
from newsletter.send.faults import SESSION_ERRORS, OpeningError
from newsletter.send.relays import Relay
from newsletter.send.replies import Result, Stage, accepts
from newsletter.send.wire import Reply, Wire, stuffed

OnAccepted = Callable[[], Awaitable[None]]
Meanwhile = Callable[[], OutgoingMessage | None] | None

_UNSAFE = re.compile(r"[<>\s\x00-\x1f\x7f]")
_ENVELOPE = (Stage.MAIL, Stage.RCPT, Stage.DATA)


class Link:
    """One SMTP session to one relay, opened on first use and recycled after
    `messages_per_connection` messages or a 421."""

    def __init__(self, relay: Relay) -> None:
        self._pool = relay  # its settings (`smtp`) and its `opener`
        self._smtp: aiosmtplib.SMTP | None = None  # the setup: what the server offers
        self._wire: Wire | None = None  # the transactions
        self._pipelining = False
        self._count = 0
        # The message whose MAIL, RCPT and DATA went out behind the last body, on that wire.
        self._announced: tuple[Wire, OutgoingMessage] | None = None
        # The command timeout of a message's commands, kept by one watchdog per session
        # instead of a timer and a future per command.
        self._deadline = 0.0  # when the awaited reply is overdue; 0 while nothing is awaited
        self._watchdog: asyncio.TimerHandle | None = None

    def holds(self, message: OutgoingMessage) -> bool:
        """Whether `message`'s MAIL, RCPT and DATA went out on this link's open wire (behind
        the last body): it must be sent here, its server waits for its body."""
        announced = self._announced
        return announced is not None and announced[1] is message and announced[0] is self._wire

    def _arm(self) -> None:
        """Start the clock for the reply to the command about to be sent."""
        self._deadline = time.monotonic() + self._pool.smtp.timeout

    def _watch(self, wire: Wire) -> None:
        if wire is not self._wire:  # that session is gone
            return
        if self._deadline and time.monotonic() > self._deadline:
            wire.expire()
            return
        self._watchdog = asyncio.get_running_loop().call_later(
            _watch_interval(self._pool.smtp.timeout), self._watch, wire
        )

    async def open(self) -> Wire:
        """This session's wire, opened now if it is not open; OpeningError if it cannot be."""
        if self._wire is not None and self._wire.is_open:
            return self._wire
        smtp, wire = await self._pool.opener.open()
        self._smtp, self._wire = smtp, wire
        self._pipelining = self._pool.smtp.pipelining and smtp.supports_extension("pipelining")
        self._count = 0
        self._deadline = 0.0
        self._watch(wire)
        return wire

    async def send(
        self, message: OutgoingMessage, on_accepted: OnAccepted, meanwhile: Meanwhile = None
    ) -> Result:
        wire, announced = self._wire, self._announced
        ready = announced is not None and announced[0] is wire and announced[1] is message
        if announced is not None and not ready:
            await self.close()  # that session waits for another message's body
        self._announced = None
        commands = None
        if not ready or wire is None or not wire.is_open:
            try:
                wire = await self.open()
            except OpeningError as failure:
                return faults.unopened(failure)  # or its TransportError
            try:
                commands = self._commands(message)
            except (aiosmtplib.SMTPNotSupported, ValueError) as exc:
                return faults.unsendable(exc)
        try:
            return await self._transaction(wire, message, commands, on_accepted, meanwhile)
        finally:
            self._deadline = 0.0

    def _commands(self, message: OutgoingMessage) -> tuple[bytes, bytes]:
        """MAIL and RCPT for `message`; SMTPNotSupported or ValueError if they cannot be."""
        options = self._mail_options(message)
        encoding = "utf-8" if b"SMTPUTF8" in options else "ascii"
        mail = b" ".join([b"MAIL FROM:" + _path(message.sender, encoding), *options])
        return mail + b"\r\n", b"RCPT TO:" + _path(message.recipient, encoding) + b"\r\n"

    def _announce(self, wire: Wire, meanwhile: Meanwhile) -> tuple[bytes, ...]:
        """Run `meanwhile`; the envelope of the message it returns, to go out behind the body
        when the server pipelines and the session will still be open for it. In the same
        write: a server that replies to the body alone first may hold the replies to a late
        envelope back (Nagle's algorithm against our delayed ACK)."""
        upcoming = meanwhile() if meanwhile is not None else None
        limit = self._pool.smtp.messages_per_connection
        if upcoming is None or not self._pipelining or self._count + 2 > limit:
            return ()
        try:
            mail, rcpt = self._commands(upcoming)
        except (aiosmtplib.SMTPNotSupported, ValueError):
            return ()  # its own send reports why
        self._announced = (wire, upcoming)
        return mail, rcpt, b"DATA\r\n"

    async def _transaction(
        self,
        wire: Wire,
        message: OutgoingMessage,
        commands: tuple[bytes, bytes] | None,
        on_accepted: OnAccepted,
        meanwhile: Meanwhile,
    ) -> Result:
        """One message on `wire`; `commands` None: its MAIL, RCPT and DATA are out already."""
        try:
            refused = await self._envelope(wire, commands)
        except SESSION_ERRORS as exc:
            await self.close()
            return faults.lost(Stage.DATA, exc)  # no 354 yet
        if refused is not None:
            return refused
        try:
            await on_accepted()
        except BaseException:
            # The server waits for a body that will not come: end the session, not a message.
            await self.close()
            raise
        data = message.data
        body = data if message.smtp_ready and data.endswith(b"\r\n") else stuffed(data)
        try:
            self._arm()
            wire.write(body, b".\r\n", *self._announce(wire, meanwhile))
            reply = await wire.reply()
        except SESSION_ERRORS as exc:
            await self.close()
            return faults.lost(Stage.BODY, exc)
        if not accepts(Stage.BODY, reply.code):
            # A reply to the end of the body: the server has decided, nothing in doubt, and the
            # transaction is over (no RSET; one would land in an announced message's body).
            result = faults.refused(Stage.BODY, reply)
            if result.code == 421:
                await self.close()
            return result
        self._count += 1
        if self._count >= self._pool.smtp.messages_per_connection:
            await self.close(polite=True)
        return faults.delivered(reply)

    async def _envelope(self, wire: Wire, commands: tuple[bytes, bytes] | None) -> Result | None:
        """MAIL, RCPT and DATA up to the server's 354: None then, else the refusal (with the
        transaction ended). One write and one wait when the server offers PIPELINING; only the
        wait when they went out behind the last body (`commands` None)."""
        mail, rcpt = commands or (b"", b"")
        replies: list[Reply] = []
        if self._pipelining:
            self._arm()
            if commands is not None:
                wire.write(mail, rcpt, b"DATA\r\n")
            try:
                for _ in _ENVELOPE:
                    replies.append(await wire.reply())
            except SESSION_ERRORS:
                # A server that refused one of them and closed (a 421 to RCPT: "closing the
                # channel", a destination's throttle) said why before it went: that reply is
                # the message's, not a connection lost.
                pairs = zip(replies, _ENVELOPE, strict=False)
                said = [(r, s) for r, s in pairs if not accepts(s, r.code)]
                if not said:
                    raise
                await self.close()
                return faults.refused(said[0][1], said[0][0])
        else:
            for command, stage in zip((mail, rcpt, b"DATA\r\n"), _ENVELOPE, strict=True):
                self._arm()
                wire.write(command)
                replies.append(reply := await wire.reply())
                if not accepts(stage, reply.code):
                    break
        for reply, stage in zip(replies, _ENVELOPE, strict=False):
            if not accepts(stage, reply.code):
                result = faults.refused(stage, reply)
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
        except SESSION_ERRORS:
            await self.close()
        return result

    async def close(self, *, polite: bool = False) -> None:
        wire, self._wire, self._smtp = self._wire, None, None
        if self._announced is not None:
            # The server waits for a body: a QUIT now would be read as part of it.
            self._announced, polite = None, False
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if wire is None:
            return
        if polite and wire.is_open:
            try:
                wire.write(b"QUIT\r\n")
                await asyncio.wait_for(wire.reply(), 5)
            except SESSION_ERRORS:
                pass
        wire.close()


def _path(address: str, encoding: str) -> bytes:
    """`<address>` for MAIL/RCPT; anything that could break out of the angle brackets or the
    command line (a control character) is refused."""
    if not address or _UNSAFE.search(address):
        raise ValueError(f"unsafe envelope address {address!r}")
    return b"<" + address.encode(encoding) + b">"


def _watch_interval(timeout: float) -> float:
    """How often a session's watchdog looks: a timeout fires at most a quarter late."""
    return min(max(timeout / 4, 0.01), 1.0)
