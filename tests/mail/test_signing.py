"""DKIM: a signed message verifies with dkimpy against the matching public key, and breaks when
anything signed is altered."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from dkim.canonicalization import CanonicalizationPolicy

from newsletter.errors import ConfigError
from newsletter.mail.message import MessageFactory
from newsletter.mail.signing import canonical_body
from newsletter.models import RenderedEmail, Subscriber
from newsletter.settings import DkimSettings, Settings

SECRET = b"test-secret-0123456789abcdef"
REQUIRED = {
    "from",
    "to",
    "subject",
    "date",
    "message-id",
    "list-id",
    "list-unsubscribe",
    "list-unsubscribe-post",
}


@pytest.fixture(scope="module")
def keypair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def dns_for(public: bytes) -> object:
    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        assert name == b"nl2026._domainkey.news.example.org."
        return record

    return lookup


@pytest.fixture
def signed_factory(
    settings: Settings, project: Path, keypair: tuple[bytes, bytes]
) -> MessageFactory:
    (project / "dkim.pem").write_bytes(keypair[0])
    config = DkimSettings(
        domain="news.example.org", selector="nl2026", private_key=Path("dkim.pem")
    )
    rendered = RenderedEmail(
        issue_number=14,
        subject="AI系统内容推荐第14期",
        html="<p>__NL_NAME__，你好！</p>"
        + "<p>正文</p>" * 500
        + '<a href="__NL_UNSUBSCRIBE_URL__">退订</a>',
        text="__NL_NAME__，你好！\n\n正文\n退订: __NL_UNSUBSCRIBE_URL__\n",
    )
    return MessageFactory(
        rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
    )


def subscriber() -> Subscriber:
    return Subscriber(envelope="li.lei@example.com", name="李雷")


def test_signed_message_verifies_against_the_public_key(
    signed_factory: MessageFactory, keypair: tuple[bytes, bytes]
) -> None:
    data = signed_factory.build(subscriber()).data
    assert data.startswith(b"DKIM-Signature: ")
    assert dkim.verify(data, dnsfunc=dns_for(keypair[1]))
    header = data.split(b"\r\n\r\n", 1)[0].decode()
    signed = re.search(r"h=([^;]+);", header.replace("\r\n", ""))
    assert signed is not None
    names = [n.strip().lower() for n in signed.group(1).split(":")]
    assert set(names) >= REQUIRED
    # Oversigned: a second From or List-Unsubscribe added later would break the signature.
    assert names.count("from") == 2
    assert names.count("list-unsubscribe") == 2
    assert max(len(line) for line in data.split(b"\r\n")) <= 998


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"Subject: =?utf-8?b?", b"Subject: =?utf-8?B?"),
        (
            b"List-Unsubscribe: <https://news.example.org/",
            b"List-Unsubscribe: <https://evil.example/",
        ),
        (b"List-Unsubscribe-Post: List-Unsubscribe=One-Click", b"List-Unsubscribe-Post: x"),
        (b"\r\n\r\n--=_nl_", b"\r\nFrom: attacker@example.com\r\n\r\n--=_nl_"),
    ],
)
def test_altered_message_fails(
    signed_factory: MessageFactory, keypair: tuple[bytes, bytes], old: bytes, new: bytes
) -> None:
    data = signed_factory.build(subscriber()).data
    assert old in data
    assert not dkim.verify(data.replace(old, new, 1), dnsfunc=dns_for(keypair[1]))


def test_altered_body_fails(signed_factory: MessageFactory, keypair: tuple[bytes, bytes]) -> None:
    data = signed_factory.build(subscriber()).data
    head, body = data.split(b"\r\n\r\n", 1)
    tampered = (
        head + b"\r\n\r\n" + body.replace(b"Content-Type: text/html", b"Content-Type: text/x", 1)
    )
    assert not dkim.verify(tampered, dnsfunc=dns_for(keypair[1]))


def test_missing_key_file_is_a_config_error(settings: Settings) -> None:
    config = DkimSettings(domain="news.example.org", selector="s", private_key=Path("missing.pem"))
    rendered = RenderedEmail(issue_number=1, subject="x", html="<p>x</p>", text="x")
    with pytest.raises(ConfigError, match=r"dkim\.private_key: cannot read"):
        MessageFactory(
            rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
        )


def test_garbage_key_is_a_config_error(settings: Settings, project: Path) -> None:
    (project / "bad.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nnope\n")
    config = DkimSettings(domain="news.example.org", selector="s", private_key=Path("bad.pem"))
    rendered = RenderedEmail(issue_number=1, subject="x", html="<p>x</p>", text="x")
    with pytest.raises(ConfigError, match="not a usable PEM RSA key"):
        MessageFactory(
            rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
        )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\r\n",
        b"\r\n\r\n\r\n",
        b"abc",
        b"abc\r\n\r\n\r\n",
        b"a b\r\nc d\r\n",
        b"a  b\r\n",
        b"a\tb \r\n \r\n",
        b"trailing \r\nspace",
        b"end with space ",
        b"QUJD\r\nREVG\r\n--=_nl_x--\r\n",
    ],
)
def test_canonical_body_matches_dkimpy(body: bytes) -> None:
    assert canonical_body(body) == CanonicalizationPolicy.from_c_value(
        b"relaxed/relaxed"
    ).canonicalize_body(body)


def test_quoted_printable_message_with_odd_spacing_verifies(
    settings: Settings, project: Path, keypair: tuple[bytes, bytes]
) -> None:
    (project / "dkim.pem").write_bytes(keypair[0])
    config = DkimSettings(
        domain="news.example.org", selector="nl2026", private_key=Path("dkim.pem")
    )
    rendered = RenderedEmail(
        issue_number=14,
        subject="Issue 14",
        html="<p>Hi __NL_NAME__,</p>\n<p>two  spaces\tand a tab </p>\n" + "<p>word</p>\n" * 50,
        text="Hi __NL_NAME__,\n\ntwo  spaces, a tab\tand trailing   \n\n\n",
    )
    factory = MessageFactory(
        rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
    )
    assert factory.text_encoder.name == "quoted-printable"
    data = factory.build(subscriber()).data
    assert dkim.verify(data, dnsfunc=dns_for(keypair[1]))


def test_the_dkimpy_internals_we_use_are_still_there() -> None:
    # mail/signing.py signs with these; if this fails, dkimpy changed them: adapt signing.py,
    # then move the version bound in pyproject.toml.
    import inspect

    import dkim

    assert list(inspect.signature(dkim.rfc822_parse).parameters) == ["message"]
    assert "namelen" in inspect.signature(dkim.fold).parameters
    assert len(inspect.signature(dkim.hash_headers).parameters) == 6


@pytest.mark.parametrize(
    "added",
    [
        b"Reply-To: attacker@example.com\r\n",
        b"Cc: someone@example.com\r\n",
        b"List-Id: other <other.example.com>\r\n",
        b"Feedback-ID: 1:x:y:evil.example\r\n",
    ],
)
def test_an_added_reply_to_cc_or_list_id_breaks_the_signature(
    signed_factory: MessageFactory, keypair: tuple[bytes, bytes], added: bytes
) -> None:
    data = signed_factory.build(subscriber()).data
    assert dkim.verify(data, dnsfunc=dns_for(keypair[1]))
    head, body = data.split(b"\r\n\r\n", 1)
    names = re.search(rb"h=([^;]+);", head.replace(b"\r\n", b"")).group(1)  # type: ignore[union-attr]
    signed = [n.strip().lower() for n in names.split(b":")]
    # Oversigned even when absent: a null instance is signed, so adding one changes the hash.
    assert signed.count(b"reply-to") == 1
    assert signed.count(b"cc") == 1
    assert signed.count(b"list-id") == 2
    assert not dkim.verify(
        head + b"\r\n" + added.rstrip(b"\r\n") + b"\r\n\r\n" + body, dnsfunc=dns_for(keypair[1])
    )


def test_ed25519_signature_beside_rsa_verifies(
    settings: Settings, project: Path, keypair: tuple[bytes, bytes]
) -> None:
    pytest.importorskip("nacl", reason="dkimpy verifies Ed25519 with PyNaCl")
    ed = ed25519.Ed25519PrivateKey.generate()
    (project / "dkim.pem").write_bytes(keypair[0])
    (project / "ed.pem").write_bytes(
        ed.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    raw_public = ed.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    config = DkimSettings(
        domain="news.example.org",
        selector="nl2026",
        private_key=Path("dkim.pem"),
        ed25519_key=Path("ed.pem"),
        ed25519_selector="nl2026e",
    )
    rendered = RenderedEmail(issue_number=14, subject="Issue 14", html="<p>x</p>", text="x")
    factory = MessageFactory(
        rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
    )
    data = factory.build(subscriber()).data
    records = {
        b"nl2026._domainkey.news.example.org.": b"v=DKIM1; k=rsa; p="
        + base64.b64encode(keypair[1]),
        b"nl2026e._domainkey.news.example.org.": b"v=DKIM1; k=ed25519; p="
        + base64.b64encode(raw_public),
    }

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        return records[name]

    assert data.count(b"DKIM-Signature: ") == 2
    assert b"a=ed25519-sha256" in data
    verifier = dkim.DKIM(data)
    assert verifier.verify(idx=0, dnsfunc=lookup)
    assert verifier.verify(idx=1, dnsfunc=lookup)
    tampered = dkim.DKIM(data.replace(b"Subject: Issue 14", b"Subject: Issue 15"))
    assert not tampered.verify(idx=0, dnsfunc=lookup)
    assert not tampered.verify(idx=1, dnsfunc=lookup)


def test_an_rsa_key_as_the_ed25519_key_is_a_config_error(
    settings: Settings, project: Path, keypair: tuple[bytes, bytes]
) -> None:
    (project / "dkim.pem").write_bytes(keypair[0])
    config = DkimSettings(
        domain="news.example.org",
        selector="s",
        private_key=Path("dkim.pem"),
        ed25519_key=Path("dkim.pem"),
    )
    rendered = RenderedEmail(issue_number=1, subject="x", html="<p>x</p>", text="x")
    with pytest.raises(ConfigError, match="not an Ed25519 key"):
        MessageFactory(
            rendered, settings.model_copy(update={"dkim": config}), "main", secret=SECRET
        )
