"""Opening an SMTP session: [smtp] settings in, a connected, greeted, secured and logged-in
session out (handed to a Wire for its transactions), or OpeningError naming the step that
failed: connect (TCP, implicit TLS, the greeting), EHLO, STARTTLS and EHLO again, AUTH, each a
call in that order. What a failure means (a retry, or a TransportError that stops the run) is
faults.py's to say. Security is explicit, never guessed: "starttls" fails when the server does
not offer it, and TLS is verified unless `verify = false`. A config that cannot work at all (a
username without a password, a CA file that does not load) is a TransportError at once.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import aiosmtplib
from pydantic import SecretStr

from newsletter.config.settings import SmtpSettings
from newsletter.errors import TransportError
from newsletter.send.faults import SESSION_ERRORS, OpeningError
from newsletter.send.replies import Stage
from newsletter.send.wire import Wire


def smtp_tls_context(smtp: SmtpSettings, root: Path | None = None) -> ssl.SSLContext:
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
        variable: str = "NEWSLETTER_SMTP_PASSWORD",
        table: str = "[smtp]",
    ) -> None:
        if smtp.username and password is None:
            raise TransportError(
                f"{table} username is {smtp.username!r} but {variable} is not set",
                hint=f"Export {variable}, or remove {table} username.",
            )
        self.smtp = smtp
        self._password = password
        self._helo = helo
        self._tls = smtp_tls_context(smtp, root) if smtp.security != "none" else None

    def __repr__(self) -> str:
        return f"Opener({self.where})"

    @property
    def where(self) -> str:
        return f"{self.smtp.host}:{self.smtp.port} ({self.smtp.security})"

    def client(self, sock: socket.socket | None = None) -> aiosmtplib.SMTP:
        return aiosmtplib.SMTP(
            sock=sock,
            hostname=self.smtp.host,  # with a socket: the name TLS checks the certificate for
            port=self.smtp.port if sock is None else None,
            local_hostname=self._helo,
            timeout=self.smtp.timeout,
            use_tls=self.smtp.security == "tls",
            start_tls=False,  # a step of its own below, so its failure is named
            tls_context=self._tls,
        )

    async def open(self, sock: socket.socket | None = None) -> tuple[aiosmtplib.SMTP, Wire]:
        """A new session, ready for MAIL: aiosmtplib's client (what the server offers) and the
        Wire its connection is handed to. Any failure raises OpeningError with its stage.
        `sock`: a socket already connected to the server (the doctor's, which looks the host
        up through [check] nameservers); TLS still checks the certificate for [smtp] host."""
        smtp = self.client(sock)
        stage = Stage.CONNECT
        try:
            await smtp.connect()  # TCP, implicit TLS, the greeting
            stage = Stage.EHLO
            # The extensions (STARTTLS, AUTH, 8BITMIME, SMTPUTF8) must be known before we go on.
            await smtp.ehlo()
            if self.smtp.security == "starttls":
                stage = Stage.STARTTLS
                if not smtp.supports_extension("starttls"):
                    raise aiosmtplib.SMTPNotSupported(
                        "[smtp] security is starttls but the server does not offer STARTTLS"
                    )
                await smtp.starttls()
                stage = Stage.EHLO
                await smtp.ehlo()  # what the server offered before TLS no longer counts
            if self.smtp.username:
                stage = Stage.AUTH
                if not smtp.supports_extension("auth"):
                    raise aiosmtplib.SMTPNotSupported(
                        "[smtp] username is set but the server offers no AUTH"
                    )
                password = self._password.get_secret_value() if self._password is not None else ""
                await smtp.login(self.smtp.username, password)
            return smtp, Wire.take_over(smtp)
        except SESSION_ERRORS as exc:
            smtp.close()
            raise OpeningError(stage, exc, self.where, self.smtp.username or "") from None
        except BaseException:
            smtp.close()
            raise
