"""The site's own mail: each kind in both languages, by the MJML pipeline; headers as an issue's
(List-Unsubscribe that verifies, Auto-Submitted, a stable keyed Message-ID); no text a visitor
typed; a recipient that could inject a header refused; DKIM that verifies with dkimpy."""

from __future__ import annotations

import base64
import email
import email.policy
import re
from email.message import EmailMessage
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.config.settings import DkimSettings, Settings
from newsletter.database.mailqueue import MailKind
from newsletter.errors import UnsafeHeaderError
from newsletter.i18n import EMAIL, PAGES, SITE_MAIL
from newsletter.mail.sitemail import SiteMessages
from newsletter.mail.tokens import verify

SECRET = b"site-mail-tests-secret-0123456789ab"
LINK = "https://news.example.org/confirm/AbCdEfGh.token-of-a-confirmation"


def _parse(data: bytes) -> EmailMessage:
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def _english(settings: Settings) -> Settings:
    newsletter = settings.newsletter.model_copy(update={"language": "en", "name": "Weekly"})
    return settings.model_copy(update={"newsletter": newsletter})


@pytest.mark.parametrize("kind", list(MailKind))
@pytest.mark.parametrize("english", [False, True])
def test_each_kind_in_each_language(settings: Settings, kind: MailKind, english: bool) -> None:
    chosen = _english(settings) if english else settings
    messages = SiteMessages(chosen, SECRET)
    recipient = "ann+visit-spam-dot-example@example.org"
    message = _parse(messages.build(7, kind, "main", recipient, LINK))
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "visit-spam" not in text + html  # the address a visitor typed is in To: only
    assert str(message["To"]) == recipient
    assert message["Auto-Submitted"] == "auto-generated"
    assert message["Content-Language"] == ("en" if english else "zh-CN")
    words = SITE_MAIL["en" if english else "zh"]
    if kind is not MailKind.WELCOME:
        assert LINK in text
        assert f'href="{LINK}"' in html
        assert words[f"{kind.value}_heading"] in html
    else:
        assert "/confirm/" not in text
    stop = re.search(r"<(https://[^>]+/unsubscribe/([^>]+))>", str(message["List-Unsubscribe"]))
    assert stop is not None
    assert verify(SECRET, stop.group(2)) == ("main", "ann+visit-spam-dot-example@example.org")
    assert stop.group(1) in text
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "<mj-" not in html  # compiled
    assert 'style="' in html  # the CSS inlined


def test_the_message_id_is_stable_and_keyed(settings: Settings) -> None:
    messages = SiteMessages(settings, SECRET)
    assert messages.message_id(7) == messages.message_id(7)
    assert messages.message_id(7) != messages.message_id(8)
    assert messages.message_id(7) != SiteMessages(settings, SECRET + b"x").message_id(7)
    assert messages.message_id(7).endswith("@news.example.org>")


@pytest.mark.parametrize(
    "recipient", ["a@example.org\r\nBcc: x@example.org", "a b@example.org", "<a@example.org>"]
)
def test_a_recipient_that_could_inject_is_refused(settings: Settings, recipient: str) -> None:
    with pytest.raises(UnsafeHeaderError):
        SiteMessages(settings, SECRET).build(1, MailKind.CONFIRM, "main", recipient, LINK)


def test_a_link_that_is_not_a_plain_url_is_refused(settings: Settings) -> None:
    with pytest.raises(UnsafeHeaderError):
        SiteMessages(settings, SECRET).build(1, MailKind.CONFIRM, "main", "a@example.org", 'x"><a')


def test_signed_with_dkim(settings: Settings, project: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (project / "dkim.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    config = DkimSettings(
        domain="news.example.org", selector="nl2026", private_key=Path("dkim.pem")
    )
    signed = settings.model_copy(update={"dkim": config, "root": project})
    data = SiteMessages(signed, SECRET).build(3, MailKind.CONFIRM, "main", "a@example.org", LINK)

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        assert name == b"nl2026._domainkey.news.example.org."
        return b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)

    assert dkim.verify(data, dnsfunc=lookup)
    assert not dkim.verify(data.replace(b"a@example.org", b"b@example.org", 1), dnsfunc=lookup)


@pytest.mark.parametrize("table", [EMAIL, PAGES, SITE_MAIL])
def test_every_language_has_every_word(table: dict[str, dict[str, str]]) -> None:
    keys = {language: set(words) for language, words in table.items()}
    assert keys["zh"] == keys["en"]
