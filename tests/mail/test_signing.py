"""DKIM: a signed message verifies with dkimpy against the matching public key, breaks when
anything signed is altered, and carries the very signature dkimpy's own signer makes of the same
message (the signer parses nothing and canonicalizes most fields once per issue, so dkimpy is
the reference it is held to)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from dkim.canonicalization import CanonicalizationPolicy

from newsletter.config.settings import DkimSettings, Settings
from newsletter.errors import ConfigError
from newsletter.mail import signing
from newsletter.mail.canonical import relaxed_field, relaxed_lines
from newsletter.mail.message import MessageFactory
from newsletter.mail.signing import IssueSigner, choose_fields
from newsletter.models import RenderedEmail, Subscriber
from support.dnszone import dns_server

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


RELAXED = CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")


@pytest.mark.parametrize(
    "lines",
    [
        b"",
        b"\r\n",
        b"\r\n\r\n\r\n",
        b"abc\r\n",
        b"a b\r\nc d\r\n",
        b"a  b\r\n",
        b"a\tb \r\n \r\n",
        b"trailing \r\nspace\r\n",
        b"  lead  and   runs\t\t \t\r\n\t\r\nx  \t  \r\n",
        b"QUJD\r\nREVG\r\n--=_nl_x--\r\n",
        b"soft =\r\nbreak  =20\r\n",
    ],
)
def test_relaxed_lines_match_dkimpy(lines: bytes) -> None:
    # dkimpy's whole-body rules (empty lines at the end dropped, an empty body one CRLF) apply
    # to the end of a body; a factory body ends with its closing boundary, so a line after
    # them shows the line rules alone.
    end = b"--=_nl_x--\r\n"
    assert relaxed_lines(lines) + end == RELAXED.canonicalize_body(lines + end)


@pytest.mark.parametrize(
    "field",
    [
        b"From: =?utf-8?b?5L2g5aW9?= <digest@news.example.org>\r\n",
        b'To: "Li  Lei" <li@example.com>\r\n',
        b"Subject: one\r\n two\r\n\tthree  four \r\n",
        b"List-Unsubscribe: <https://x.example/u/T>,\r\n <mailto:u@x.example?subject=u>\r\n",
        b'Content-Type: multipart/alternative;\r\n boundary="=_nl_0"\r\n',
        b"X-Empty:\r\n",
        b"MiXeD-CaSe:  \t value\t\r\n",
    ],
)
def test_relaxed_field_matches_dkimpy(field: bytes) -> None:
    parsed, _ = dkim.rfc822_parse(field + b"\r\n")
    ((name, canonical),) = RELAXED.canonicalize_headers(parsed)
    assert relaxed_field(field) == (name, name + b":" + canonical)


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


# -- the fast path against dkimpy's own signer -----------------------------------------------------

PINNED = 1_780_000_000.25
NAMES = [
    "李雷",
    "",
    "Zoë Ünal",
    "Dave O'Neil",
    'Quote "me" \\ back',
    "Li  Lei",
    " padded  name ",
    "Ünal   Zoë",
    "非常长的名字" * 8,
    "A rather long ASCII name that will have to be folded over two lines " * 2,
    "María-José de la Cruz y Fernández de Córdoba",
]
SIGNATURES = re.compile(rb"(?:DKIM-Signature:[^\r\n]*\r\n(?:[ \t][^\r\n]*\r\n)*)+")


def recipients(count: int) -> list[Subscriber]:
    return [
        Subscriber(
            envelope=f"reader.{i}.{'x' * (i % 7 * 9)}@example{i % 3}.org",
            name=NAMES[i % len(NAMES)],
        )
        for i in range(count)
    ]


def tag_values(header: bytes) -> dict[bytes, bytes]:
    unfolded = header.split(b":", 1)[1].replace(b"\r\n", b"")
    pairs = (tag.strip().split(b"=", 1) for tag in unfolded.split(b";"))
    return {name: value.replace(b" ", b"") for name, value in pairs}


def split_signatures(data: bytes) -> tuple[list[bytes], bytes]:
    """Our DKIM-Signature headers, each with its folded lines, and the message they sign."""
    match = SIGNATURES.match(data)
    assert match is not None
    block = match.group()
    headers = re.findall(rb"DKIM-Signature:[^\r\n]*\r\n(?:[ \t][^\r\n]*\r\n)*", block)
    return headers, data[match.end() :]


@pytest.fixture
def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def configured(
    settings: Settings,
    project: Path,
    keypair: tuple[bytes, bytes],
    ed_key: ed25519.Ed25519PrivateKey | None = None,
    **newsletter: str,
) -> Settings:
    (project / "dkim.pem").write_bytes(keypair[0])
    ed_path = None
    if ed_key is not None:
        ed_path = Path("ed.pem")
        (project / ed_path).write_bytes(
            ed_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    config = DkimSettings(
        domain="news.example.org",
        selector="nl2026",
        private_key=Path("dkim.pem"),
        ed25519_key=ed_path,
        ed25519_selector="nl2026e" if ed_key else "",
    )
    bounces = settings.bounces.model_copy(update={"return_path": "b@news.example.org"})
    return settings.model_copy(
        update={
            "dkim": config,
            "bounces": bounces,
            "newsletter": settings.newsletter.model_copy(update=newsletter),
        }
    )


CJK = RenderedEmail(
    issue_number=14,
    subject="AI系统内容推荐第14期：一个很长的标题，长到要折成好几行才放得下" * 2,
    html="<p>__NL_NAME__，你好！</p>"
    + "<p>正文</p>" * 500
    + '<a href="__NL_UNSUBSCRIBE_URL__">退订</a> <a href="__NL_WEB_URL__">网页版</a>',
    text="__NL_NAME__，你好！\n\n正文\n退订: __NL_UNSUBSCRIBE_URL__\n",
)
LATIN = RenderedEmail(
    issue_number=15,
    subject="Issue 15:  two  spaces and a very long subject line that has to fold " * 2,
    html="<table>\n    <tr>\n\t<td>Hi __NL_NAME__,</td>  </tr>\n"
    + "<p>word  word\tword </p>\n" * 80
    + '<p><a href="__NL_UNSUBSCRIBE_URL__">unsubscribe</a></p>  \n\n',
    text="Hi __NL_NAME__,\n\ntwo  spaces, a tab\tand trailing   \n" * 20
    + "Unsubscribe: __NL_UNSUBSCRIBE_URL__\n\n\n",
)


@pytest.mark.parametrize(
    ("rendered", "list_name", "encoding"),
    [(CJK, "main", "base64"), (LATIN, "staging", "quoted-printable")],
)
def test_the_signature_is_what_dkimpy_signs_for_the_same_message(
    settings: Settings,
    project: Path,
    keypair: tuple[bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
    rendered: RenderedEmail,
    list_name: str,
    encoding: str,
) -> None:
    """Over many recipients (names with non-ASCII, quotes, runs of spaces, long enough to fold,
    with and without a VERP tag), a Reply-To and a test send: every tag is dkim.sign's, bh= and
    b= too (PKCS#1 v1.5 and Ed25519 are deterministic: the same b= means the same canonical
    headers were signed), and the message verifies."""
    monkeypatch.setattr(time, "time", lambda: PINNED)
    with_reply_to = configured(
        settings, project, keypair, reply_to="Редакция  <editor@news.example.org>"
    )
    factory = MessageFactory(rendered, with_reply_to, list_name, secret=SECRET)
    assert factory.html_encoder.name == encoding
    for index, reader in enumerate(recipients(36)):
        data = factory.build(reader, row_id=index if index % 2 else None).data
        (ours,), message = split_signatures(data)
        names = tag_values(ours)[b"h"].split(b":")
        # Oversigned, present or not: dkimpy is handed the same h=, locks and all.
        assert [names.count(n) for n in (b"from", b"to", b"subject")] == [2, 2, 2]
        assert [names.count(n) for n in (b"list-unsubscribe", b"list-unsubscribe-post")] == [2, 2]
        assert [names.count(n) for n in (b"reply-to", b"cc", b"list-id")] == [2, 1, 2]
        assert (b"x-newsletter-tag" in names) == bool(index % 2)
        theirs = dkim.sign(
            message,
            b"nl2026",
            b"news.example.org",
            keypair[0],
            canonicalize=(b"relaxed", b"relaxed"),
            include_headers=names,
        )
        assert tag_values(ours)[b"bh"] == tag_values(theirs)[b"bh"]
        assert tag_values(ours) == tag_values(theirs)
        assert dkim.verify(data, dnsfunc=dns_for(keypair[1]))


def test_the_ed25519_signature_is_what_dkimpy_signs_too(
    settings: Settings,
    project: Path,
    keypair: tuple[bytes, bytes],
    ed_key: ed25519.Ed25519PrivateKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("nacl", reason="dkimpy signs Ed25519 with PyNaCl")
    monkeypatch.setattr(time, "time", lambda: PINNED)
    factory = MessageFactory(
        LATIN, configured(settings, project, keypair, ed_key), "main", secret=SECRET
    )
    seed = ed_key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    for reader in recipients(24):
        (rsa_header, ed_header), message = split_signatures(factory.build(reader).data)
        for ours, selector, key, algorithm in [
            (rsa_header, b"nl2026", keypair[0], b"rsa-sha256"),
            (ed_header, b"nl2026e", base64.b64encode(seed), b"ed25519-sha256"),
        ]:
            theirs = dkim.sign(
                message,
                selector,
                b"news.example.org",
                key,
                canonicalize=(b"relaxed", b"relaxed"),
                signature_algorithm=algorithm,
                include_headers=tag_values(ours)[b"h"].split(b":"),
            )
            assert tag_values(ours) == tag_values(theirs)


def test_per_message_only_the_recipients_own_fields_are_canonicalized_and_nothing_parsed(
    signed_factory: MessageFactory,
    keypair: tuple[bytes, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    canonicalized: list[bytes] = []

    def counting(field: bytes) -> tuple[bytes, bytes]:
        canonicalized.append(field.partition(b":")[0])
        return relaxed_field(field)

    def no_parsing(message: bytes) -> None:
        raise AssertionError("a message was parsed")

    monkeypatch.setattr(signing, "relaxed_field", counting)
    monkeypatch.setattr(dkim, "rfc822_parse", no_parsing)
    monkeypatch.setattr(dkim.canonicalization.Relaxed, "canonicalize_body", no_parsing)
    data = signed_factory.build(subscriber()).data
    # From, Subject, Date, List-Id and the rest were done once, when the factory was made.
    assert canonicalized == [b"To", b"Message-ID", b"List-Unsubscribe", b"DKIM-Signature"]
    monkeypatch.undo()
    assert dkim.verify(data, dnsfunc=dns_for(keypair[1]))


def test_the_body_hash_from_the_saved_leading_state_is_the_whole_bodys() -> None:
    leading = b"--b\r\nContent-Type: text/plain\r\n\r\nHello\r\n"
    issue = IssueSigner([], [], leading)
    for body in [leading + b"reader\r\n--b--\r\n", leading, b"other\r\n" + leading, b""]:
        expected = base64.b64encode(hashlib.sha256(body).digest())
        assert issue.body_hash(body) == expected
        assert issue.body_hash(memoryview(b"xx" + body)[2:]) == expected


def test_h_takes_the_last_instance_first_and_oversigned_names_take_nothing() -> None:
    names = (b"from", b"to", b"subject", b"x-other", b"from", b"list-id")
    signed, order = choose_fields(names)
    include = signed.split(b" : ")
    assert include == [
        b"from",
        b"to",
        b"subject",
        b"list-id",
        b"from",
        b"to",
        b"subject",
        b"reply-to",
        b"cc",
        b"list-id",
    ]
    fields = [(name, str(index).encode()) for index, name in enumerate(names)]
    assert [fields[i] for i in order] == dkim.select_headers(fields, include)
    assert order == [4, 1, 2, 5, 0]


# Mail::DKIM (Perl), the verifier SpamAssassin and amavis use: a second, independent reading.
MAIL_DKIM = r"""
use strict; use warnings; use Mail::DKIM::Verifier; use Net::DNS::Resolver;
Mail::DKIM::DNS::resolver(Net::DNS::Resolver->new(
    nameservers => ["127.0.0.1"], port => $ARGV[0], recurse => 0, udp_timeout => 5, retry => 1));
local $/ = "\0";
while (my $data = <STDIN>) {
    chomp $data;
    my $verifier = Mail::DKIM::Verifier->new();
    $verifier->PRINT($data);
    $verifier->CLOSE();
    print join(",", map { $_->result } $verifier->signatures), "\n";
}
"""


def mail_dkim_results(messages: list[bytes], public: bytes) -> list[str]:
    found = shutil.which("perl") and subprocess.run(
        ["perl", "-MMail::DKIM::Verifier", "-e", "1"], capture_output=True
    )
    if not found or found.returncode != 0:
        reason = "Mail::DKIM (Debian: libmail-dkim-perl, with spamassassin) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real verifier: {reason}")
        pytest.skip(reason)
    record = "v=DKIM1; k=rsa; p=" + base64.b64encode(public).decode()
    with dns_server({("nl2026._domainkey.news.example.org", "TXT"): [record]}) as (port, _):
        out = subprocess.run(
            ["perl", "-e", MAIL_DKIM, str(port)],
            input=b"\0".join(messages) + b"\0",
            capture_output=True,
            timeout=120,
            check=True,
        )
    return out.stdout.decode().splitlines()


@pytest.mark.parametrize("rendered", [CJK, LATIN])
@pytest.mark.slow
def test_mail_dkim_the_verifier_spamassassin_uses_passes_them(
    settings: Settings, project: Path, keypair: tuple[bytes, bytes], rendered: RenderedEmail
) -> None:
    factory = MessageFactory(
        rendered,
        configured(settings, project, keypair, reply_to="Ed  Itor <e@news.example.org>"),
        "main",
        secret=SECRET,
    )
    messages = [factory.build(r, row_id=i).data for i, r in enumerate(recipients(24))]
    tampered = messages[0].replace(b"Message-ID: <", b"Message-ID: <x", 1)
    assert mail_dkim_results([*messages, tampered], keypair[1]) == ["pass"] * 24 + ["fail"]
