"""A message's header fields and its body in DKIM's relaxed form in, its DKIM-Signature
headers (RFC 6376, relaxed/relaxed) out: rsa-sha256, and ed25519-sha256 (RFC 8463) beside it when
[dkim] ed25519_key is set.

Used only when newsletter.toml has a [dkim] table (domain, selector, private_key file). The
signature covers the headers that identify the mail and its unsubscribe route: Gmail and Yahoo
require List-Unsubscribe and List-Unsubscribe-Post to be signed for one-click unsubscribe, and
Gmail's feedback loop wants Feedback-ID signed. From, To, Subject and both List-Unsubscribe
fields are signed once more than they occur ("oversigned"), so nobody on the way can add a second
one without breaking the signature; Reply-To, Cc and List-Id likewise even when the message has
none, so a Reply-To added on the way (to catch the answers) breaks it too.

Nothing is parsed: MessageFactory hands over the header fields it wrote, one by one, and the body
lines already canonicalized (mail/canonical.py, mail/mime.py), and IssueSigner prepares once per
issue what every message shares (the fixed fields' relaxed forms, h= and the fields it picks, the
hash state after the body's leading lines). Per message that leaves the SHA-256 of the body, a few
short fields, and the private-key operation, which `cryptography` (OpenSSL) does. The tags are
those dkimpy's `dkim.sign` writes, in its order, so for the same message, key and second the
two sign the same bytes: tests/mail/test_signing.py holds the signer to dkimpy's signature.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterable, Sequence

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from newsletter.config.settings import Settings
from newsletter.errors import ConfigError
from newsletter.mail.canonical import relaxed_field
from newsletter.mail.mime import fold_words

# Lowercased, as they are written into h= (names compare without case).
SIGNED = (
    b"from",
    b"to",
    b"subject",
    b"date",
    b"message-id",
    b"reply-to",
    b"list-id",
    b"list-unsubscribe",
    b"list-unsubscribe-post",
    b"mime-version",
    b"content-type",
    b"content-language",
    b"x-newsletter-test",
    b"feedback-id",
    b"x-newsletter-tag",
)
OVERSIGNED = (b"from", b"to", b"subject", b"list-unsubscribe", b"list-unsubscribe-post")
# Signed one more time than they occur even when absent: none can be added later.
ALWAYS_OVERSIGNED = (b"reply-to", b"cc", b"list-id")
HEADER = b"DKIM-Signature"
_ED_HINT = (
    "Generate one with `openssl genpkey -algorithm ed25519 -out dkim-ed25519.pem` and publish "
    "`v=DKIM1; k=ed25519; p=<the raw 32-byte public key, base64>` at "
    "<ed25519_selector>._domainkey.<domain>."
)
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

    def sign(self, signed: bytes, hashed: bytes, body_hash: bytes) -> bytes:
        """The DKIM-Signature header, CRLF-terminated, for a message whose header fields that
        h= names (`signed`, see choose_fields) have the relaxed forms `hashed`, in h='s order,
        and whose relaxed body hashes (SHA-256, base64) to `body_hash`."""
        tags = [
            b"v=1",
            b"a=" + self.algorithm,
            b"c=relaxed/relaxed",
            b"d=" + self.domain,
            b"i=@" + self.domain,
            b"q=dns/txt",
            b"s=" + self.selector,
            b"t=" + str(int(time.time())).encode("ascii"),
            b"h=" + signed,
            b"bh=" + body_hash,
            b"b=",
        ]
        # Folded only at its spaces (after a tag's ";" or an h= name's ":"), so the relaxed
        # form does not depend on where. The header is hashed last, with b= empty and without
        # its CRLF.
        text = b"; ".join(tags).decode("ascii")
        words = text.replace("; ", ";\n").replace(" : ", " :\n").split("\n")
        unsigned = fold_words(HEADER.decode("ascii"), words).encode("ascii")
        _, own = relaxed_field(unsigned)
        digest = hashlib.sha256(hashed + own[:-2]).digest()
        if self._ed_key is not None:
            # RFC 8463: PureEdDSA over the SHA-256 of the canonical headers.
            raw = self._ed_key.sign(digest)
        else:
            raw = self._key.sign(digest, padding.PKCS1v15(), utils.Prehashed(hashes.SHA256()))
        signature = base64.b64encode(raw)
        # Whitespace inside b= is not part of it (RFC 6376, 3.5): it may break anywhere.
        folded = b"".join(b"\r\n " + signature[i : i + 72] for i in range(0, len(signature), 72))
        return unsigned[:-2] + folded + b"\r\n"


class IssueSigner:
    """The DKIM signers of one MessageFactory, with what every message of the issue shares made
    once: the relaxed forms of the header fields that are the same in all of them, h= and the
    fields it picks for each set of field names, and the SHA-256 state after the leading lines
    of the body (those before the first line a recipient's values change)."""

    def __init__(
        self,
        signers: Sequence[DkimSigner],
        fixed_fields: Iterable[bytes],
        body_leading: bytes,
        headers: Sequence[bytes] = SIGNED,
    ) -> None:
        self.signers = list(signers)
        self._fixed = {field: relaxed_field(field) for field in fixed_fields}
        self._leading = body_leading
        self._leading_state = hashlib.sha256(body_leading)
        self._headers = headers
        self._choices: dict[tuple[bytes, ...], tuple[bytes, list[int]]] = {}

    def sign(self, fields: Sequence[bytes], body: bytes | memoryview) -> bytes:
        """One DKIM-Signature header per signer (each over the same bytes: none is in
        another's h=) for the message whose header fields are `fields`, each as written with
        its CRLF and in order, and whose body in relaxed form is `body`."""
        fixed = self._fixed
        relaxed = [fixed.get(field) or relaxed_field(field) for field in fields]
        names = tuple(name for name, _ in relaxed)
        choice = self._choices.get(names)
        if choice is None:
            choice = self._choices[names] = choose_fields(names, self._headers)
        signed, order = choice
        hashed = b"".join([relaxed[index][1] for index in order])
        body_hash = self.body_hash(body)
        return b"".join([signer.sign(signed, hashed, body_hash) for signer in self.signers])

    def body_hash(self, body: bytes | memoryview) -> bytes:
        """bh=: the base64 SHA-256 of a relaxed body, from the saved state when it starts
        with the leading lines (else from the start: the result is the same)."""
        size = len(self._leading)
        if body[:size] == self._leading:
            state = self._leading_state.copy()
            state.update(body[size:])
        else:
            state = hashlib.sha256(body)
        return base64.b64encode(state.digest())


def choose_fields(
    names: Sequence[bytes], headers: Sequence[bytes] = SIGNED
) -> tuple[bytes, list[int]]:
    """h= for a message whose header field names (lowercased) are `names`, in order, and the
    index of the field each entry of h= hashes: the names of `headers` the message has, then the
    oversigned ones again; for each entry the last instance not yet taken, and nothing when none
    is left (RFC 6376, 5.4.2), which is what makes an oversigned name lock its field."""
    present = set(names)
    include = [name for name in headers if name in present]
    include += [name for name in OVERSIGNED if name in present]
    include += ALWAYS_OVERSIGNED
    instances: dict[bytes, list[int]] = {}
    for index, name in enumerate(names):
        instances.setdefault(name, []).append(index)
    order = [instances[name].pop() for name in include if instances.get(name)]
    return b" : ".join(include), order
