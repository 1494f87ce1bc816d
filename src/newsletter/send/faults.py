"""What an SMTP session meets in, what it means out: the one place that maps every aiosmtplib
exception, every fault of a session's wire and every reply, at each stage, to a `Result` (an
outcome and its scope) or, for a fault in setting a session up, a TransportError.

Opening a session (opening.py raises `OpeningError`, naming the stage):

    a certificate that does not verify (implicit TLS or STARTTLS)    -> TransportError
    STARTTLS or AUTH not offered, refused (5xx), no AUTH method works  -> TransportError
    the greeting or EHLO refused (4xx or 5xx), any 421, AUTH's 4xx      -> RETRY, connection
    refused, reset, timed out, not SMTP, a TLS handshake that failed    -> RETRY, connection

A refused greeting or EHLO refuses the session, not the message about to go out: a reconnect
that meets one retries that message later and counts towards the circuit breaker (a server
that refuses every session stops the run, resumable), never rejects it. A TransportError means
no message can go out until the config is fixed: the run stops, resumable. `Pool.check` opens
a session before anything is planned; there every failure is a TransportError (`check_failed`).

A message's transaction (smtp.py):

    a reply that does not accept MAIL, RCPT, DATA or the body  -> the reply table (replies.py)
    the connection lost or timed out before DATA's 354         -> RETRY, connection
    ... after it, during the upload                            -> UNKNOWN (the server may have it)
    a message we cannot put on the wire (an unsafe address,
    8-bit content or SMTPUTF8 the server does not offer)       -> FAILED, recipient
"""

from __future__ import annotations

import ipaddress
import ssl

import aiosmtplib

from newsletter.config.settings import SmtpSettings
from newsletter.errors import TransportError
from newsletter.send.replies import Outcome, Result, Scope, Stage, classify, reply_text
from newsletter.send.wire import Reply

# What a session can raise, all mapped here: aiosmtplib's exceptions (a refusal, a connection
# gone, a timeout, a reply that is not SMTP; wire.py raises the same ones) and OSError, which
# asyncio's TimeoutError and ssl's errors are.
SESSION_ERRORS = (aiosmtplib.SMTPException, OSError)


class OpeningError(Exception):
    """A session could not be opened: at which `stage`, why (`cause`, one of SESSION_ERRORS),
    and the server (`where`) and user it was opened for, for the message."""

    def __init__(self, stage: Stage, cause: BaseException, where: str, user: str = "") -> None:
        super().__init__(f"{where}: {stage}: {cause}")
        self.stage = stage
        self.cause = cause
        self.where = where
        self.user = user


_NOT_OFFERED_HINT = {
    Stage.STARTTLS: "Use the server's submission port, or set [smtp] security to match it.",
    Stage.AUTH: "Check [smtp] security (many servers offer AUTH only over TLS) and port.",
}


def unopened(failure: OpeningError) -> Result:
    """A session that could not be opened mid-run: what it means for the message that was to
    go out on it. Raises TransportError for a fault in the setup."""
    mapped = _opening(failure)
    if isinstance(mapped, TransportError):
        raise mapped
    return mapped


# The capture server's port: `newsletter mailbox`'s, and [smtp]'s default (init's too, for a
# first test send), on 127.0.0.1 without TLS.
CAPTURE_PORT = 1025


def check_failed(failure: OpeningError, smtp: SmtpSettings | None = None) -> TransportError:
    """The same failure at the check before the run: none may pass, all are errors. With the
    relay's settings (`smtp`), a connection refused at the capture server's address says to
    start it: that is what a first test send meets, never a password."""
    mapped = _opening(failure)
    if isinstance(mapped, TransportError):
        return mapped
    if mapped.code is not None:
        return TransportError(
            f"{failure.where}: the server refused the session at {failure.stage}:"
            f" {mapped.code} {_text(failure.cause)}"
        )
    if smtp is not None and is_capture(smtp) and failure.stage == Stage.CONNECT:
        return TransportError(
            f"{failure.where}: {mapped.reply}",
            hint=f"{smtp.host}:{smtp.port} is the capture server's address, and it is not"
            " running: start it with `newsletter mailbox` (in another terminal), then re-run."
            " For real mail, set [smtp] host, port and security to your mail server's.",
        )
    return TransportError(f"{failure.where}: {mapped.reply}")


def is_capture(smtp: SmtpSettings) -> bool:
    """[smtp] at the capture server's address: its port on loopback, without TLS."""
    return smtp.security == "none" and smtp.port == CAPTURE_PORT and is_loopback(smtp.host)


def is_loopback(host: str) -> bool:
    """A host that is this machine: localhost or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# aiosmtplib's own exceptions that say the connection failed, as opposed to a refusal.
_CONNECTION = (
    aiosmtplib.SMTPServerDisconnected,
    aiosmtplib.SMTPConnectError,
    aiosmtplib.SMTPTimeoutError,
    aiosmtplib.SMTPResponseException,  # the invalid_response left: not a reply at all
    OSError,
)


def _opening(failure: OpeningError) -> Result | TransportError:
    stage, exc, where = failure.stage, failure.cause, failure.where
    cert = _cert_error(exc)
    if cert is not None:
        return TransportError(
            f"{where}: the server's TLS certificate is not trusted: {cert.verify_message}",
            hint="Fix the server's certificate, or set [smtp] ca_file to its CA.",
        )
    if isinstance(exc, aiosmtplib.SMTPNotSupported):  # opening.py: STARTTLS or AUTH not offered
        return TransportError(f"{where}: {exc.message}", hint=_NOT_OFFERED_HINT.get(stage))
    if (
        isinstance(exc, aiosmtplib.SMTPResponseException)
        and exc.code != aiosmtplib.SMTPStatus.invalid_response  # not a reply, or one too long
    ):
        return _refused_opening(failure, exc.code, reply_text(exc.message))
    if stage == Stage.AUTH and not isinstance(exc, _CONNECTION):
        # aiosmtplib found no AUTH method both sides know.
        return TransportError(
            f"{where}: cannot log in: {_text(exc)}",
            hint="The server offers no AUTH method we speak (PLAIN, LOGIN, CRAM-MD5): check"
            " [smtp] host, port and security.",
        )
    return Result(Outcome.RETRY, Scope.CONNECTION, None, f"cannot connect: {_text(exc)}")


def _refused_opening(failure: OpeningError, code: int, text: str) -> Result | TransportError:
    stage, where = failure.stage, failure.where
    temporary = 400 <= code < 500
    if stage in (Stage.CONNECT, Stage.EHLO) or code == 421 or (stage == Stage.AUTH and temporary):
        return Result(Outcome.RETRY, Scope.CONNECTION, code, f"session refused at {stage}: {text}")
    if stage == Stage.STARTTLS:
        return TransportError(
            f"{where}: STARTTLS refused: {code} {text}", hint=_NOT_OFFERED_HINT[stage]
        )
    return TransportError(
        f"{where}: AUTH refused for user {failure.user!r}: {code} {text}",
        hint="Check [smtp] username and NEWSLETTER_SMTP_PASSWORD.",
    )


def refused(stage: Stage, reply: Reply) -> Result:
    """A reply that does not accept the transaction's command at `stage`."""
    return classify(reply.code, reply.message, stage)


def lost(stage: Stage, exc: BaseException) -> Result:
    """The connection lost (or the reply overdue, or not SMTP) while a transaction waited at
    `stage`: before the body, the server cannot have the message; during it, it may."""
    if stage == Stage.BODY:
        return Result(
            Outcome.UNKNOWN, Scope.CONNECTION, None, f"connection lost during DATA: {_text(exc)}"
        )
    return Result(
        Outcome.RETRY, Scope.CONNECTION, None, f"connection lost before DATA's 354: {_text(exc)}"
    )


def unsendable(exc: ValueError | aiosmtplib.SMTPNotSupported) -> Result:
    """A message smtp.py will not put on this wire: its own fault, whatever the server."""
    return Result(Outcome.FAILED, Scope.RECIPIENT, None, _text(exc))


def delivered(reply: Reply) -> Result:
    """The body accepted: the reply holds the server's queue id."""
    return Result(Outcome.SENT, Scope.RECIPIENT, reply.code, reply.message)


def _cert_error(exc: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """aiosmtplib wraps a certificate failure at connect in SMTPConnectError, not at STARTTLS."""
    while exc is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _text(exc: BaseException) -> str:
    """What an exception says, as reply text (aiosmtplib's may quote the server)."""
    return reply_text(getattr(exc, "message", "") or str(exc)) or type(exc).__name__


class Breaker:
    """The run's stop rules over results in a row (`threshold` of each): connection failures
    (every relay unreachable or refusing: the circuit breaker), and refusals of the message
    itself (its content: stop before every reader is failed). A message sent resets both."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.failures = 0
        self.refused = 0

    def judge(self, result: Result) -> str:
        """Count `result`; why the run must stop now, or ''."""
        self.failures = self.failures + 1 if result.scope == Scope.CONNECTION else 0
        if result.outcome == Outcome.SENT:
            self.refused = 0
        elif result.outcome == Outcome.FAILED and result.scope == Scope.MESSAGE:
            self.refused += 1
        if self.failures >= self.threshold:
            return (
                f"{self.failures} connection failures in a row"
                f" (last: {result.describe()}): circuit breaker open"
            )
        if self.refused >= self.threshold:
            return (
                f"the server refused the message itself {self.refused} times in a row"
                f" (last: {result.describe()}): fix it, then re-run with --retry-failed"
            )
        return ""
