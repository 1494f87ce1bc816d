"""Opening an SMTP session: [smtp] settings in, a connected, greeted, secured and logged-in
aiosmtplib session out, or TransportError for a fault in the setup itself.

A certificate that does not verify, a refused STARTTLS or AUTH, no password for a username: no
message can go out until the config is fixed, so these are errors of the run, not of a message
(smtp.py maps what can go wrong with a message). Security is explicit, never guessed: "starttls"
fails when the server does not offer it, and TLS is verified unless `verify = false`.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import aiosmtplib
from pydantic import SecretStr

from newsletter.errors import TransportError
from newsletter.send.replies import reply_text
from newsletter.settings import SmtpSettings


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


class Opener:
    """Opens sessions to the server in `smtp`, each set up the same way."""

    def __init__(
        self,
        smtp: SmtpSettings,
        *,
        password: SecretStr | None,
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

    def __repr__(self) -> str:
        return f"Opener({self.where})"

    @property
    def where(self) -> str:
        return f"{self.smtp.host}:{self.smtp.port} ({self.smtp.security})"

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

    async def open(self) -> aiosmtplib.SMTP:
        """A new session, ready for MAIL. A refused connection or greeting raises aiosmtplib's
        own errors (a retry for the caller); a setup fault raises TransportError."""
        smtp = self.client()
        try:
            await smtp.connect()
            if smtp.last_ehlo_response is None and smtp.last_helo_response is None:
                # The extensions (AUTH, 8BITMIME, SMTPUTF8) must be known before we go on.
                await smtp.ehlo()
            if self.smtp.username:
                await self._login(smtp)
        except (ssl.SSLCertVerificationError, aiosmtplib.SMTPConnectError) as exc:
            smtp.close()
            cert = _cert_error(exc)
            if cert is None:
                raise
            raise TransportError(
                f"{self.where}: the server's TLS certificate is not trusted: {cert.verify_message}",
                hint="Fix the server's certificate, or set [smtp] ca_file to its CA.",
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            smtp.close()
            if exc.code == aiosmtplib.SMTPStatus.invalid_response:
                # Not a reply, or one over aiosmtplib's cap: a fault of the connection.
                raise aiosmtplib.SMTPServerDisconnected(reply_text(exc.message)) from None
            if self.smtp.security == "starttls" and exc.code in (454, 500, 502, 503):
                raise TransportError(
                    f"{self.where}: STARTTLS refused: {exc.code} {reply_text(exc.message)}",
                    hint="Use the server's submission port, or set [smtp] security to match it.",
                ) from None
            raise
        except BaseException:
            smtp.close()
            raise
        return smtp

    async def _login(self, smtp: aiosmtplib.SMTP) -> None:
        if not smtp.supports_extension("auth"):
            raise TransportError(
                f"{self.where}: [smtp] username is set but the server offers no AUTH",
                hint="Check [smtp] security (many servers offer AUTH only over TLS) and port.",
            )
        password = self._password.get_secret_value() if self._password is not None else ""
        try:
            await smtp.login(self.smtp.username, password)
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise TransportError(
                f"{self.where}: AUTH refused for user {self.smtp.username!r}:"
                f" {exc.code} {reply_text(exc.message)}",
                hint="Check [smtp] username and NEWSLETTER_SMTP_PASSWORD.",
            ) from None
        except aiosmtplib.SMTPException as exc:
            if isinstance(exc, aiosmtplib.SMTPResponseException):
                raise
            raise TransportError(
                f"{self.where}: cannot log in: {reply_text(exc.message)}"
            ) from None


def _cert_error(exc: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """aiosmtplib wraps a certificate failure at connect in SMTPConnectError, not at STARTTLS."""
    while exc is not None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None
