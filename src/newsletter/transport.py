"""SMTP both ways: OutgoingMessages in, one Result per message out; and the capture server.

`Pool` keeps up to N aiosmtplib connections (one SMTP session is strictly serial, so concurrency
means several sessions), opens them lazily with the security set explicitly in [smtp], and
recycles each after `messages_per_connection` messages or any 421. Every aiosmtplib exception is
mapped to an `Outcome` here and nowhere else, by scope:

    recipient   4xx -> DEFERRED, 5xx -> REJECTED          (this message only)
    connection  drop/timeout before DATA -> RETRY,         (reconnect, try again)
                drop/timeout during DATA -> UNKNOWN        (the server may have it)
    account     454, throttling 421 -> THROTTLED            (slow down)
                550 5.4.5 daily quota, sender refused -> STOPPED (end the run)

Mistakes in the setup itself (certificate not trusted, AUTH refused, STARTTLS not offered, no
password) raise TransportError: no message can go out until the config is fixed.

`send` calls MAIL and RCPT, then the caller's `on_accepted` (which commits `sending`), then DATA,
so only the upload itself is ever in doubt. Its optional `meanwhile` runs once the body is
written, while the server takes it in: time the caller can use (the engine builds the next
message there) instead of waiting idle for the reply.

`serve_mailbox` is the embedded capture server behind `newsletter mailbox`: aiosmtpd on loopback,
each message stored in a Maildir, one line printed per message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.errors
import email.header
import email.parser
import email.policy
import mailbox as maildir
import re
import signal
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import aiosmtplib
from aiosmtpd.smtp import SMTP as SMTPServer  # noqa: N811
from aiosmtpd.smtp import Envelope, Session
from pydantic import SecretStr

from newsletter.errors import TransportError
from newsletter.models import OutgoingMessage
from newsletter.settings import SmtpSettings


class Outcome(StrEnum):
    SENT = "sent"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    FAILED = "failed"
    RETRY = "retry"
    UNKNOWN = "unknown"
    THROTTLED = "throttled"
    STOPPED = "stopped"


class Scope(StrEnum):
    RECIPIENT = "recipient"
    CONNECTION = "connection"
    ACCOUNT = "account"


@dataclass(frozen=True)
class Result:
    """What became of one message. `reply` is the server's text (for 250 it holds the queue id)."""

    outcome: Outcome
    scope: Scope
    code: int | None = None
    reply: str = ""

    def describe(self) -> str:
        return f"{self.code} {self.reply}".strip() if self.code else self.reply


OnAccepted = Callable[[], None]
Meanwhile = Callable[[], None] | None

_QUOTA = re.compile(r"\b5\.4\.5\b|daily .*(quota|limit)|quota exceeded", re.IGNORECASE)
_THROTTLE = re.compile(r"throttl|rate limit|too many (messages|connections)|slow down", re.I)
_CONNECTION_ERRORS = (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError, OSError)


def classify(code: int, reply: str, stage: str) -> Result:
    """Map one SMTP reply that is not success to an outcome; `stage` is mail, rcpt or data."""
    if 500 <= code < 600 and _QUOTA.search(reply):
        return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
    if code == 454 or (400 <= code < 500 and _THROTTLE.search(reply)):
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if code == 421:
        return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)
    if stage == "mail":
        # Refusing the sender refuses every message of the run.
        if 500 <= code < 600:
            return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if 400 <= code < 500:
        return Result(Outcome.DEFERRED, Scope.RECIPIENT, code, reply)
    if 500 <= code < 600:
        return Result(Outcome.REJECTED, Scope.RECIPIENT, code, reply)
    return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)


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
        # instead of aiosmtplib's wait_for per command (a timer and a future each, ~9 us).
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

        on_accepted()
        try:
            reply = await _data(smtp, message, meanwhile, self._arm)
        except aiosmtplib.SMTPDataError as exc:
            # A reply to DATA or to the end of the body: the server has decided, nothing in doubt.
            return await self._refused(classify(exc.code, exc.message, "data"))
        except aiosmtplib.SMTPResponseException as exc:
            return await self._refused(classify(exc.code, exc.message, "data"))
        except (*_CONNECTION_ERRORS, aiosmtplib.SMTPException) as exc:
            text = self._lost(exc)
            await self.close()
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


async def _data(
    smtp: aiosmtplib.SMTP,
    message: OutgoingMessage,
    meanwhile: Meanwhile = None,
    arm: Callable[[], None] | None = None,
) -> aiosmtplib.SMTPResponse:
    """DATA without smtp.data()'s two regex passes over the whole body (~1 ms per 50 KB
    message). A message whose builder vouches for it (`smtp_ready`: CRLF only, no line starting
    with ".") goes out as it is; any other CRLF-only message is dot-stuffed by one
    bytes.replace after three counts (~0.2 ms); anything else goes through smtp.data(). Same
    wire bytes, same errors and the same close-on-timeout either way."""
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


def _watch_interval(timeout: float) -> float:
    """How often a session's watchdog looks: a timeout fires at most a quarter late."""
    return min(max(timeout / 4, 0.01), 1.0)


def _crlf_only(data: bytes) -> bool:
    lines = data.count(b"\n")
    return lines == data.count(b"\r\n") and lines == data.count(b"\r")


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


# -- the capture server ---------------------------------------------------------------------


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

    def __init__(self, directory: Path, report: Callable[[Captured], None]) -> None:
        directory.parent.mkdir(parents=True, exist_ok=True)
        self.box = maildir.Maildir(directory, create=True)
        self.report = report
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
        return "250 OK captured"


def _decode(value: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (ValueError, LookupError, email.errors.HeaderParseError):
        return value


async def serve_mailbox(
    directory: Path, report: Callable[[Captured], None], host: str = "127.0.0.1", port: int = 1025
) -> asyncio.Server:
    """Start the capture server; the caller awaits `serve_forever()` or closes it."""
    handler = CaptureHandler(directory, report)
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
) -> None:
    """Serve until SIGINT or SIGTERM, then close cleanly (messages in progress are kept)."""
    server = await serve_mailbox(directory, report, host, port)
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
