"""A finished message in, its DKIM-Signature header (RFC 6376, via dkimpy) out.

Used only when newsletter.toml has a [dkim] table (domain, selector, private_key file). The
signature covers the headers that identify the mail and its unsubscribe route: Gmail and Yahoo
require List-Unsubscribe and List-Unsubscribe-Post to be signed for one-click unsubscribe. From,
To, Subject and both List-Unsubscribe fields are signed once more than they occur ("oversigned"),
so nobody on the way can add a second one without breaking the signature.
"""

from __future__ import annotations

from collections.abc import Iterable

import dkim

from newsletter.errors import ConfigError
from newsletter.settings import Settings

SIGNED = (
    b"From",
    b"To",
    b"Subject",
    b"Date",
    b"Message-ID",
    b"Reply-To",
    b"List-Id",
    b"List-Unsubscribe",
    b"List-Unsubscribe-Post",
    b"MIME-Version",
    b"Content-Type",
    b"Content-Language",
    b"X-Newsletter-Test",
)
OVERSIGNED = (b"From", b"To", b"Subject", b"List-Unsubscribe", b"List-Unsubscribe-Post")


class DkimSigner:
    """Signs with one (domain, selector, RSA private key); relaxed/relaxed canonicalization."""

    def __init__(
        self, domain: str, selector: str, private_key: bytes, *, where: str = "[dkim]"
    ) -> None:
        if not domain or not selector:
            raise ConfigError(f"{where}: `domain` and `selector` must both be set")
        try:
            dkim.crypto.parse_pem_private_key(private_key)
        except dkim.crypto.UnparsableKeyError as exc:
            raise ConfigError(
                f"{where}: the private key is not a PEM RSA key ({exc})",
                hint="Generate one with `openssl genrsa -out dkim.pem 2048` and publish its "
                "public half as <selector>._domainkey.<domain> TXT.",
            ) from None
        self.domain = domain.encode("ascii")
        self.selector = selector.encode("ascii")
        self._key = private_key

    @classmethod
    def from_settings(cls, settings: Settings) -> DkimSigner:
        config = settings.dkim
        if config is None:
            raise ConfigError("DKIM signing needs a [dkim] table in newsletter.toml")
        path = settings.resolve(config.private_key)
        try:
            key = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"dkim.private_key: cannot read {path}: {exc.strerror or exc}",
                hint="Point [dkim] private_key at the PEM file with the selector's private key.",
            ) from None
        try:
            return cls(config.domain, config.selector, key, where=f"dkim ({path})")
        except UnicodeEncodeError:
            raise ConfigError("dkim: domain and selector must be ASCII (use punycode)") from None

    def sign(self, message: bytes, headers: Iterable[bytes] = SIGNED) -> bytes:
        """The DKIM-Signature header line(s), CRLF-terminated, to put in front of `message`."""
        present = {name.lower() for name in _field_names(message)}
        include = [h for h in headers if h.lower() in present]
        include += [h for h in OVERSIGNED if h.lower() in present]
        try:
            signature: bytes = dkim.sign(
                message,
                self.selector,
                self.domain,
                self._key,
                canonicalize=(b"relaxed", b"relaxed"),
                include_headers=include,
                linesep=b"\r\n",
            )
        except dkim.DKIMException as exc:
            raise ConfigError(f"dkim: cannot sign: {exc}") from None
        return signature


def _field_names(message: bytes) -> list[bytes]:
    head = message.split(b"\r\n\r\n", 1)[0]
    return [line.split(b":", 1)[0] for line in head.split(b"\r\n") if line[:1] not in b" \t"]
