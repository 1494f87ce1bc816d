"""The site's own mail: a kind (confirmation, welcome, address change), a list, a recipient and
the link it carries in; the message's bytes out.

Each kind is a pair of templates in templates/email/ (confirm.mjml and confirm.txt, welcome.*,
change.*, all extending site.*), rendered by the issue's own pipeline (Jinja, MJML by MRML, CSS
inlined: render.py, htmlpart.py) in the newsletter's language, once per (kind, list); per mail
only the link is filled in. Nothing in them comes from a visitor: the templates get the
newsletter's and the list's names (the editor's), the link, the unsubscribe link and the
archive's address, and the recipient appears only in the To header.

Headers as an issue's: From, To (the address alone), Subject, Date, a Message-ID keyed with
NEWSLETTER_SECRET from the queued mail's id (the same on a retry), Reply-To when set, the list's
List-Id, List-Unsubscribe with List-Unsubscribe-Post (one click stops all mail to the address
on that list, confirmations included), Auto-Submitted (RFC 3834: no auto-replies, please),
Feedback-ID, MIME-Version, Content-Language, and a DKIM signature with [dkim].
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import hmac
import html
import re
from typing import Any

from newsletter.config.settings import Settings
from newsletter.database.mailqueue import MailKind
from newsletter.errors import ConfigError, UnsafeHeaderError
from newsletter.i18n import EMAIL, FONT_STACKS, SITE_MAIL, strings_for
from newsletter.links import unsubscribe_url
from newsletter.mail.canonical import relaxed_lines
from newsletter.mail.listid import list_id
from newsletter.mail.mime import (
    CRLF,
    MAX_LINE,
    choose_encoder,
    mailbox_header,
    part_head,
    unstructured_header,
)
from newsletter.mail.tokens import sign
from newsletter.models import OutgoingMessage
from newsletter.rendering.render import render_parts

# What stands in for the links while the templates render (filled per mail).
_LINK = "NLSITELINK7f3a9c2e"
_STOP = "NLSITESTOP7f3a9c2e"
_MESSAGE_ID_LABEL = b"newsletter-site-mail-id-v1\n"
_BLOCK = re.compile(rb"(?:[!-9;-~]+:[ \t][\x20-\x7e]*\r\n(?:[ \t][\x20-\x7e]*\r\n)*)+")
_SUBJECT = {MailKind.CONFIRM: "confirm_subject", MailKind.WELCOME: "welcome_subject"}


class SiteMessages:
    """The site's mail for one project and secret."""

    def __init__(self, settings: Settings, secret: bytes) -> None:
        self.settings = settings
        self._secret = secret
        newsletter = settings.newsletter
        self._sender_name, self.sender = email.utils.parseaddr(newsletter.sender)
        if not self.sender or not self.sender.isascii():
            raise ConfigError(f"newsletter.sender: {newsletter.sender!r} is not a usable address")
        self.domain = self.sender.rpartition("@")[2]
        self._reply_to = email.utils.parseaddr(newsletter.reply_to) if newsletter.reply_to else None
        mailto = email.utils.parseaddr(newsletter.unsubscribe_email or newsletter.sender)[1]
        self._mailto = mailto
        self._cache: dict[tuple[MailKind, str], tuple[str, str, str]] = {}
        self._signer: Any = None
        if settings.dkim is not None:
            from newsletter.mail.signing import DkimSigner, IssueSigner

            self._signer = IssueSigner(DkimSigner.from_settings(settings), [], b"")

    def build(
        self, mail_id: int, kind: MailKind, list_name: str, recipient: str, link: str
    ) -> bytes:
        """The finished message (headers, text and HTML parts) for one queued mail. `link` is
        the confirmation's (or the change's) page; a welcome mail has none."""
        if not recipient.isascii() or re.search(r"[\s<>\x00-\x1f\x7f]", recipient):
            raise UnsafeHeaderError(f"site mail {mail_id}: the recipient {recipient!r} is unsafe")
        if not re.fullmatch(r"[!-~]*", link) or any(c in link for c in "<>\"'"):
            raise UnsafeHeaderError(f"site mail {mail_id}: the link is not a plain URL")
        subject, text, part = self._rendered(kind, list_name)
        token = sign(self._secret, list_name, recipient.lower())
        stop = unsubscribe_url(self.settings.newsletter.base_url, token)
        text = text.replace(_LINK, link).replace(_STOP, stop)
        part = part.replace(_LINK, html.escape(link)).replace(_STOP, html.escape(stop))
        boundary = "=_nl_site_" + hashlib.sha256(part.encode()).hexdigest()[:24]
        fields = self._fields(mail_id, kind, list_name, recipient, subject, stop, token, boundary)
        text_head, text_lines, text_relaxed = _part("text/plain", text, boundary)
        html_head, html_lines, html_relaxed = _part("text/html", part, boundary)
        close = f"--{boundary}--\r\n".encode("ascii")
        body = b"".join([text_head, *text_lines, html_head, *html_lines, close])
        header = b"".join(fields)
        if self._signer is not None:
            relaxed = relaxed_lines(
                b"".join([text_head, *text_relaxed, html_head, *html_relaxed, close])
            )
            header = self._signer.sign(fields, relaxed) + header
        if not _BLOCK.fullmatch(header) or max(map(len, header.split(CRLF))) > MAX_LINE:
            raise UnsafeHeaderError(f"site mail {mail_id}: the header block is malformed")
        return header + CRLF + body

    def message(
        self, mail_id: int, kind: MailKind, list_name: str, recipient: str, link: str
    ) -> OutgoingMessage:
        return OutgoingMessage(
            message_id=self.message_id(mail_id),
            sender=self.sender,
            recipient=recipient,
            data=self.build(mail_id, kind, list_name, recipient, link),
        )

    def message_id(self, mail_id: int) -> str:
        mac = hmac.digest(self._secret, _MESSAGE_ID_LABEL + str(mail_id).encode(), "sha256")
        return f"<{mac[:16].hex()}@{self.domain}>"

    def _fields(
        self,
        mail_id: int,
        kind: MailKind,
        list_name: str,
        recipient: str,
        subject: str,
        stop: str,
        token: str,
        boundary: str,
    ) -> list[bytes]:
        settings = self.settings
        chosen = settings.mailing_list(list_name)
        label = chosen.name or settings.newsletter.name
        fields = [
            mailbox_header("From", self._sender_name, self.sender),
            mailbox_header("To", "", recipient),
            unstructured_header("Subject", subject),
            f"Date: {email.utils.format_datetime(dt.datetime.now(dt.UTC))}\r\n",
            f"Message-ID: {self.message_id(mail_id)}\r\n",
        ]
        if self._reply_to is not None:
            fields.append(mailbox_header("Reply-To", *self._reply_to))
        mailto = f"mailto:{self._mailto}?subject=unsubscribe%20{token}"
        fields += [
            mailbox_header("List-Id", label, list_id(chosen.id, list_name, self.domain)),
            f"List-Unsubscribe: <{stop}>,\r\n <{mailto}>\r\n",
            "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n",
            "Auto-Submitted: auto-generated\r\n",
            f"Feedback-ID: {kind.value}:{re.sub(r'[^A-Za-z0-9._-]', '-', list_name)}"
            f":newsletter:{self.domain}\r\n",
            "MIME-Version: 1.0\r\n",
            f"Content-Language: {settings.newsletter.language}\r\n",
            f'Content-Type: multipart/alternative;\r\n boundary="{boundary}"\r\n',
        ]
        return [field.encode("ascii") for field in fields]

    def _rendered(self, kind: MailKind, list_name: str) -> tuple[str, str, str]:
        found = self._cache.get((kind, list_name))
        if found is None:
            found = self._cache[(kind, list_name)] = _render(self.settings, kind, list_name)
        return found


def _render(settings: Settings, kind: MailKind, list_name: str) -> tuple[str, str, str]:
    """(subject, text, HTML) of one kind for one list, with markers in place of the links:
    rendered once, filled per mail."""
    language = settings.newsletter.language
    newsletter = settings.newsletter.name
    chosen = settings.mailing_list(list_name)
    label = chosen.name or newsletter
    hours = f"{settings.signup.confirm_expiry:g}"
    words = {
        key: value.replace("{name}", newsletter).replace("{list}", label).replace("{hours}", hours)
        for key, value in strings_for(SITE_MAIL, language).items()
    }
    subject = words[_SUBJECT.get(kind, "change_subject")]
    context = {
        "lang": language,
        "newsletter_name": newsletter,
        "list_label": label,
        "subject": subject,
        "font_stack": strings_for(FONT_STACKS, language)["all"],
        "text": words,
        "email": strings_for(EMAIL, language, name=newsletter),
        "link": _LINK,
        "unsubscribe_url": _STOP,
        "archive_url": settings.newsletter.base_url.rstrip("/") + "/",
    }
    text, part = render_parts(settings, kind.value, context)
    return subject, text.strip("\n") + "\n", part


def _crlf(content: str) -> bytes:
    return content.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n").encode()


def _part(content_type: str, content: str, boundary: str) -> tuple[bytes, list[bytes], list[bytes]]:
    """One body part: its head, its encoded lines, and those lines in DKIM's relaxed form."""
    encoder = choose_encoder([_crlf(content)])
    lines, relaxed = encoder.encode_relaxed([])
    return part_head(content_type, encoder.name, boundary), lines, relaxed
