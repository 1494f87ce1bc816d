"""A finished message in, its DKIM-Signature header (RFC 6376, relaxed/relaxed) out: rsa-sha256,
and ed25519-sha256 (RFC 8463) beside it when [dkim] ed25519_key is set.

Used only when newsletter.toml has a [dkim] table (domain, selector, private_key file). The
signature covers the headers that identify the mail and its unsubscribe route: Gmail and Yahoo
require List-Unsubscribe and List-Unsubscribe-Post to be signed for one-click unsubscribe, and
Gmail's feedback loop wants Feedback-ID signed. From, To, Subject and both List-Unsubscribe
fields are signed once more than they occur ("oversigned"), so nobody on the way can add a second
one without breaking the signature; Reply-To, Cc and List-Id likewise even when the message has
none, so a Reply-To added on the way (to catch the answers) breaks it too.

dkimpy does the DKIM work (parsing, canonicalization, choosing and hashing the signed headers);
only the RSA operation goes to `cryptography` (OpenSSL): dkimpy's pure-Python RSA would make
signing, not SMTP, the limit on sending speed (README, Benchmarks).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterable

import dkim
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from dkim.canonicalization import (
    CanonicalizationPolicy,
    correct_empty_body,
    strip_trailing_lines,
)

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
    b"Feedback-ID",
    b"X-Newsletter-Tag",
)
OVERSIGNED = (b"From", b"To", b"Subject", b"List-Unsubscribe", b"List-Unsubscribe-Post")
# Signed one more time than they occur even when absent: none can be added later.
ALWAYS_OVERSIGNED = (b"Reply-To", b"Cc", b"List-Id")
HEADER = b"DKIM-Signature"
_ED_HINT = (
    "Generate one with `openssl genpkey -algorithm ed25519 -out dkim-ed25519.pem` and publish "
    "`v=DKIM1; k=ed25519; p=<the raw 32-byte public key, base64>` at "
    "<ed25519_selector>._domainkey.<domain>."
)
_RELAXED = CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
_KEY_HINT = (
    "Generate one with `openssl genrsa -out dkim.pem 2048` and publish its public half as a TXT "
    "record at <selector>._domainkey.<domain>."
)


class DkimSigner:
    """Signs with one (domain, selector, private key): RSA, or Ed25519 with `ed25519=True`."""

    def __init__(
        self,
        domain: str,
        selector: str,
        private_key: bytes,
        *,
        where: str = "[dkim]",
        ed25519: bool = False,
    ) -> None:
        if not domain or not selector:
            raise ConfigError(f"{where}: `domain` and `selector` must both be set")
        kind = "Ed25519" if ed25519 else "RSA"
        hint = _ED_HINT if ed25519 else _KEY_HINT
        try:
            key = serialization.load_pem_private_key(private_key, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise ConfigError(
                f"{where}: the private key is not a usable PEM {kind} key (or it has a password)",
                hint=hint,
            ) from None
        self.algorithm = b"ed25519-sha256" if ed25519 else b"rsa-sha256"
        if ed25519:
            if not isinstance(key, Ed25519PrivateKey):
                raise ConfigError(f"{where}: the private key is not an Ed25519 key", hint=hint)
            self._ed_key: Ed25519PrivateKey | None = key
        elif not isinstance(key, rsa.RSAPrivateKey):
            raise ConfigError(f"{where}: the private key is not an RSA key", hint=_KEY_HINT)
        else:
            self._ed_key = None
            self._key = key
        if not ed25519 and self._key.key_size < 1024:
            raise ConfigError(
                f"{where}: a {self._key.key_size}-bit key is too short (receivers ignore it)",
                hint=_KEY_HINT,
            )
        try:
            self.domain = domain.encode("ascii")
            self.selector = selector.encode("ascii")
        except UnicodeEncodeError:
            raise ConfigError(f"{where}: domain and selector must be ASCII (punycode)") from None

    @classmethod
    def from_settings(cls, settings: Settings) -> list[DkimSigner]:
        """The RSA signer of [dkim], and the Ed25519 one when `ed25519_key` is set."""
        config = settings.dkim
        if config is None:
            raise ConfigError("DKIM signing needs a [dkim] table in newsletter.toml")
        keys = [("private_key", config.private_key, config.selector, False)]
        if config.ed25519_key is not None:
            selector = config.ed25519_selector or config.selector
            keys.append(("ed25519_key", config.ed25519_key, selector, True))
        signers = []
        for field, file, selector, ed in keys:
            path = settings.resolve(file)
            try:
                key = path.read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"dkim.{field}: cannot read {path}: {exc.strerror or exc}",
                    hint=f"Point [dkim] {field} at the PEM file with the selector's private key.",
                ) from None
            signers.append(cls(config.domain, selector, key, where=f"dkim ({path})", ed25519=ed))
        return signers

    def public_key(self) -> rsa.RSAPublicKey:
        """The half receivers fetch from DNS (`newsletter check --online` compares them)."""
        return self._key.public_key()

    def sign(self, message: bytes, headers: Iterable[bytes] = SIGNED) -> bytes:
        """The DKIM-Signature header line(s), CRLF-terminated, to put in front of `message`."""
        # Parse only the header block: splitting a 50 KB body into lines costs a millisecond.
        head, _, body = message.partition(b"\r\n\r\n")
        parsed, _ = dkim.rfc822_parse(head + b"\r\n\r\n")
        present = {name.lower() for name, _ in parsed}
        include = [h for h in headers if h.lower() in present]
        include += [h for h in OVERSIGNED if h.lower() in present]
        include += ALWAYS_OVERSIGNED
        body_hash = base64.b64encode(hashlib.sha256(canonical_body(body)).digest())
        fields = [
            (b"v", b"1"),
            (b"a", self.algorithm),
            (b"c", b"relaxed/relaxed"),
            (b"d", self.domain),
            (b"s", self.selector),
            (b"t", str(int(time.time())).encode("ascii")),
            (b"h", b" : ".join(include)),
            (b"bh", body_hash),
            (b"b", b""),
        ]
        # b= comes last and is hashed empty, so the signature can be appended afterwards.
        unsigned: bytes = dkim.fold(b"; ".join(b"=".join(f) for f in fields), namelen=len(HEADER))
        digest = hashlib.sha256()
        dkim.hash_headers(
            digest,
            _RELAXED,
            _RELAXED.canonicalize_headers(parsed),
            [h.lower() for h in include],
            (HEADER, b" " + unsigned),
            dict(fields),
        )
        if self._ed_key is not None:
            # RFC 8463: PureEdDSA over the SHA-256 of the canonical headers.
            raw = self._ed_key.sign(digest.digest())
        else:
            raw = self._key.sign(
                digest.digest(), padding.PKCS1v15(), utils.Prehashed(hashes.SHA256())
            )
        signature = base64.b64encode(raw)
        folded = b"".join(b"\r\n " + signature[i : i + 72] for i in range(0, len(signature), 72))
        return HEADER + b": " + unsigned + folded + b"\r\n"


def canonical_body(body: bytes) -> bytes:
    """dkimpy's relaxed body canonicalization, skipping its two whole-body regex passes when
    they cannot change anything: no tab, no double space, no space before a line end (base64
    and most QP bodies)."""
    if b"\t" in body or b"  " in body or b" \r\n" in body:
        result: bytes = _RELAXED.canonicalize_body(body)
        return result
    trimmed: bytes = correct_empty_body(strip_trailing_lines(body))
    return trimmed
