"""The SMTP client: OutgoingMessages in, one Result per message out.

`Pool` keeps up to N aiosmtplib connections (one SMTP session is strictly serial, so concurrency
means several sessions), opens them lazily with the security set explicitly in [smtp], and
recycles each after `messages_per_connection` messages or any 421. This is the one place that
maps aiosmtplib's exceptions: a reply to `replies.classify`, a dropped connection or a timeout to
RETRY before the upload and to UNKNOWN during it (the server may have the message).

Mistakes in the setup itself (certificate not trusted, AUTH refused, STARTTLS not offered, no
password) raise TransportError: no message can go out until the config is fixed.

`send` calls MAIL, RCPT and DATA, and once the server has answered DATA with 354 the caller's
`on_accepted` (which commits `sending`), then uploads the body: only the upload itself is ever
in doubt, and a connection lost before the 354 is a plain retry. Its optional `meanwhile` runs
once the body is written, while the server takes it in: time the caller can use (the engine
builds the next message there) instead of waiting idle for the reply.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import aiosmtplib
from pydantic import SecretStr

from newsletter.errors import TransportError
from newsletter.models import OutgoingMessage
from newsletter.send.replies import Outcome, Result, Scope, classify
from newsletter.send.upload import upload
from newsletter.settings import SmtpSettings

OnAccepted = Callable[[], None]
Meanwhile = Callable[[], None] | None

_CONNECTION_ERRORS = (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError, OSError)


def tls_context(smtp: SmtpSettings, root: Path | None = None) -> ssl.SSLContext:
    """Verified against the system store (or `ca_file`) unless `verify = false` says otherwise."""
    if not smtp.verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ca = smtp.ca_file
    if ca is not None and root is not None and not ca.is_absolute():
        ca = root / ca
    try:
        return ssl.create_default_context(cafile=str(ca) if ca else None)
    except (OSError, ssl.SSLError) as exc:
        raise TransportError(f"[smtp] ca_file {ca}: cannot load: {exc}") from None


class Connection:
    """One SMTP session, opened on first use and recycled after `limit` messages or a 421."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._smtp: aiosmtplib.SMTP | None = None
        self._count = 0
        # The command timeout of a message's commands, kept by one watchdog per session
        # instead of aiosmtplib's wait_for per command (a timer and a future each).
        self._deadline = 0.0  # when the awaited reply is overdue; 0 while nothing is awaited
        self._expired = False
        self._watchdog: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        """Start the clock for the reply to the command about to be sent."""
        self._deadline = time.monotonic() + self._pool.smtp.timeout

    def _watch(self, smtp: aiosmtplib.SMTP) -> None:
        if smtp is not self._smtp:  # that session is gone
            return
        if self._deadline and time.monotonic() > self._deadline:
            # Closing fails the awaited reply with SMTPServerDisconnected, as a timeout does.
            self._expired = True
            smtp.close()
            return
        self._watchdog = asyncio.get_running_loop().call_later(
            _watch_interval(self._pool.smtp.timeout), self._watch, smtp
        )

    def _lost(self, exc: BaseException) -> str:
        return "Timed out waiting for server response" if self._expired else _text(exc)

    async def _open(self) -> aiosmtplib.SMTP:
        if self._smtp is not None and self._smtp.is_connected:
            return self._smtp
        pool = self._pool
        smtp = pool.client()
        try:
            await smtp.connect()
            if smtp.last_ehlo_response is None and smtp.last_helo_response is None:
                # The extensions (AUTH, 8BITMIME, SMTPUTF8) must be known before we go on.
                await smtp.ehlo()
            if pool.smtp.username:
                await self._login(smtp)
        except (ssl.SSLCertVerificationError, aiosmtplib.SMTPConnectError) as exc:
            smtp.close()
            cert = _cert_error(exc)
            if cert is None:
                raise
            raise TransportError(
                f"{pool.where}: the server's TLS certificate is not trusted: {cert.verify_message}",
                hint="Fix the server's certificate, or set [smtp] ca_file to its CA.",
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            smtp.close()
            if pool.smtp.security == "starttls" and exc.code in (454, 500, 502, 503):
                raise TransportError(
                    f"{pool.where}: STARTTLS refused: {exc.code} {exc.message}",
                    hint="Use the server's submission port, or set [smtp] security to match it.",
                ) from None
            raise
        except BaseException:
            smtp.close()
            raise
        self._smtp = smtp
        self._count = 0
        self._deadline = 0.0
        self._expired = False
        self._watch(smtp)
        return smtp

    async def _login(self, smtp: aiosmtplib.SMTP) -> None:
        pool = self._pool
        if not smtp.supports_extension("auth"):
            raise TransportError(
                f"{pool.where}: [smtp] username is set but the server offers no AUTH",
                hint="Check [smtp] security (many servers offer AUTH only over TLS) and port.",
            )
        try:
            await smtp.login(pool.smtp.username, pool.password())
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise TransportError(
                f"{pool.where}: AUTH refused for user {pool.smtp.username!r}:"
                f" {exc.code} {exc.message}",
                hint="Check [smtp] username and NEWSLETTER_SMTP_PASSWORD.",
            ) from None
        except aiosmtplib.SMTPException as exc:
            if isinstance(exc, aiosmtplib.SMTPResponseException):
                raise
            raise TransportError(f"{pool.where}: cannot log in: {exc.message}") from None

    async def send(
        self, message: OutgoingMessage, on_accepted: OnAccepted, meanwhile: Meanwhile = None
    ) -> Result:
        try:
            smtp = await self._open()
        except aiosmtplib.SMTPResponseException as exc:
            return classify(exc.code, exc.message, "connect")
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException, ssl.SSLError) as exc:
            return Result(Outcome.RETRY, Scope.CONNECTION, None, f"cannot connect: {_text(exc)}")

        try:
            options = self._mail_options(smtp, message)
            encoding = "utf-8" if "SMTPUTF8" in options else "ascii"
            sender = _path(message.sender, encoding)
            recipient = _path(message.recipient, encoding)
        except aiosmtplib.SMTPNotSupported as exc:
            return Result(Outcome.FAILED, Scope.RECIPIENT, None, exc.message)
        except ValueError as exc:
            return Result(Outcome.FAILED, Scope.RECIPIENT, None, str(exc))
        try:
            return await self._transaction(
                smtp, message, sender, recipient, options, on_accepted, meanwhile
            )
        finally:
            self._deadline = 0.0

    async def _transaction(
        self,
        smtp: aiosmtplib.SMTP,
        message: OutgoingMessage,
        sender: bytes,
        recipient: bytes,
        options: list[str],
        on_accepted: OnAccepted,
        meanwhile: Meanwhile,
    ) -> Result:
        try:
            # execute_command rather than mail()/rcpt(): the same commands and the same
            # control-character check, without re-parsing addresses message.py already checked.
            # timeout=None: the watchdog times each reply (see _watch).
            opts = [o.encode("ascii") for o in options]
            self._arm()
            reply = await smtp.execute_command(b"MAIL", b"FROM:" + sender, *opts, timeout=None)
            if reply.code != 250:
                return await self._refused(classify(reply.code, reply.message, "mail"))
            self._arm()
            reply = await smtp.execute_command(b"RCPT", b"TO:" + recipient, timeout=None)
            if reply.code not in (250, 251):
                return await self._refused(classify(reply.code, reply.message, "rcpt"))
        except ValueError as exc:
            return Result(Outcome.FAILED, Scope.RECIPIENT, None, str(exc))
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException) as exc:
            text = self._lost(exc)
            await self.close()
            return Result(Outcome.RETRY, Scope.CONNECTION, None, f"connection lost: {text}")

        started = False

        def on_start() -> None:
            nonlocal started
            started = True
            on_accepted()

        try:
            reply = await upload(smtp, message, meanwhile, self._arm, on_start)
        except aiosmtplib.SMTPDataError as exc:
            # A reply to DATA or to the end of the body: the server has decided, nothing in doubt.
            return await self._refused(classify(exc.code, exc.message, "data"))
        except aiosmtplib.SMTPResponseException as exc:
            return await self._refused(classify(exc.code, exc.message, "data"))
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException) as exc:
            text = self._lost(exc)
            await self.close()
            if not started:
                # No 354 yet: the server cannot have the message.
                return Result(
                    Outcome.RETRY, Scope.CONNECTION, None, f"connection lost at DATA: {text}"
                )
            return Result(
                Outcome.UNKNOWN, Scope.CONNECTION, None, f"connection lost during DATA: {text}"
            )
        self._count += 1
        if self._count >= self._pool.smtp.messages_per_connection:
            await self.close(polite=True)
        return Result(Outcome.SENT, Scope.RECIPIENT, reply.code, reply.message)

    def _mail_options(self, smtp: aiosmtplib.SMTP, message: OutgoingMessage) -> list[str]:
        options = []
        if not message.data.isascii():
            if not smtp.supports_extension("8BITMIME"):
                raise aiosmtplib.SMTPNotSupported(
                    "the message has 8-bit content and the server does not offer 8BITMIME"
                )
            options.append("BODY=8BITMIME")
        if not (message.sender.isascii() and message.recipient.isascii()):
            if not smtp.supports_extension("SMTPUTF8"):
                raise aiosmtplib.SMTPNotSupported(
                    "the address is not ASCII and the server does not offer SMTPUTF8"
                )
            options.append("SMTPUTF8")
        return options

    async def _refused(self, result: Result) -> Result:
        """The server answered: end the transaction, and the session too after a 421."""
        if result.code == 421 or self._smtp is None:
            await self.close()
            return result
        try:
            await self._smtp.rset()
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException):
            await self.close()
        return result

    async def close(self, *, polite: bool = False) -> None:
        smtp, self._smtp = self._smtp, None
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if smtp is None:
            return
        if polite and smtp.is_connected:
            try:
                await smtp.quit(timeout=5)
            except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException):
                pass
        smtp.close()


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
        if smtp.username and password is None:
            raise TransportError(
                f"[smtp] username is {smtp.username!r} but NEWSLETTER_SMTP_PASSWORD is not set",
                hint="Export NEWSLETTER_SMTP_PASSWORD, or remove [smtp] username.",
            )
        self.smtp = smtp
        self._password = password
        self._helo = helo
        self._tls = tls_context(smtp, root) if smtp.security != "none" else None
        self._idle: asyncio.Queue[Connection] = asyncio.Queue()
        self._all = [Connection(self) for _ in range(size)]
        for conn in self._all:
            self._idle.put_nowait(conn)

    def __repr__(self) -> str:
        return f"Pool({self.where}, size={len(self._all)})"

    @property
    def where(self) -> str:
        return f"{self.smtp.host}:{self.smtp.port} ({self.smtp.security})"

    def password(self) -> str:
        return self._password.get_secret_value() if self._password is not None else ""

    def client(self) -> aiosmtplib.SMTP:
        return aiosmtplib.SMTP(
            hostname=self.smtp.host,
            port=self.smtp.port,
            local_hostname=self._helo,
            timeout=self.smtp.timeout,
            use_tls=self.smtp.security == "tls",
            start_tls=self.smtp.security == "starttls",
            tls_context=self._tls,
        )

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
    """`<address>` for MAIL/RCPT; anything that could break out of the angle brackets is refused."""
    if not address or any(ch in address for ch in "<> \t\r\n\0"):
        raise ValueError(f"unsafe envelope address {address!r}")
    return b"<" + address.encode(encoding) + b">"


def _watch_interval(timeout: float) -> float:
    """How often a session's watchdog looks: a timeout fires at most a quarter late."""
    return min(max(timeout / 4, 0.01), 1.0)


def _cert_error(exc: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """aiosmtplib wraps a certificate failure at connect in SMTPConnectError, not at STARTTLS."""
    while exc is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _text(exc: BaseException) -> str:
    text = getattr(exc, "message", "") or str(exc)
    return text or type(exc).__name__
