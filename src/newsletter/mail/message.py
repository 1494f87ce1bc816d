"""A RenderedEmail + one Subscriber -> the exact MIME bytes that subscriber's mailbox receives.

A MessageFactory is built once per (issue, list): it checks and encodes every header that is the
same for all recipients, splits the text and HTML on the Placeholder words, and chooses each
part's transfer encoding (base64 for CJK-heavy parts, quoted-printable when that is smaller).
`build(subscriber)` then only fills the values (HTML-escaped in the HTML part), encodes the few
lines that changed, and joins bytes: no EmailMessage, no re-rendering per recipient. Tracked
links are slots too (mail/tracking.py): filled here once, or per reader in `per-reader` mode.

The output is ``multipart/alternative`` (text, then HTML), UTF-8, CRLF line ends, no line over
78 octets in the headers where folding allows and never over 998 anywhere. Header values that
could inject a header (CR, LF, NUL, other controls, raw ``=?...?=``) are refused with
UnsafeHeaderError, and every serialized header block is checked again before it leaves.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import hmac
import html
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from email_validator import EmailNotValidError, validate_email

from newsletter.bounces.verp import TAG_HEADER, make_tag, return_path
from newsletter.config.settings import Settings
from newsletter.errors import ConfigError, TemplateError, UnsafeHeaderError
from newsletter.i18n import EMAIL, strings_for
from newsletter.importers.subscribers import fold_address
from newsletter.links import issue_url, unsubscribe_url
from newsletter.mail.canonical import relaxed_lines
from newsletter.mail.clicktokens import MAX_BLOCK_ROW
from newsletter.mail.listid import list_id
from newsletter.mail.mime import (
    CRLF,
    MAX_LINE,
    PRINTABLE,
    check_header_value,
    choose_encoder,
    mailbox_header,
    part_head,
    unstructured_header,
)
from newsletter.mail.tokens import sign, signing_key
from newsletter.mail.tracking import PROBE_ROW, ClickLinks, Slot, fold_links
from newsletter.models import (
    PLACEHOLDER_PREFIX,
    OutgoingMessage,
    Placeholder,
    RenderedEmail,
    Subscriber,
    header_problem,
)
from newsletter.rendering.linkslots import SLOT_WORD
from newsletter.rendering.places import Place
from newsletter.webhooks.common import echo_header

if TYPE_CHECKING:
    from newsletter.mail.signing import IssueSigner

TEST_HEADER = "X-Newsletter-Test"
_MESSAGE_ID_LABEL = b"newsletter-message-id-v1\n"
_PLACEHOLDER = re.compile(re.escape(PLACEHOLDER_PREFIX) + r"[A-Z0-9_]*__")
_PLAIN_ID = re.compile(r"<[!-;=?-~]+>")  # printable ASCII, no spaces or angle brackets inside
_EML_NAME = re.compile(r"[0-9]{6,}-[A-Za-z0-9@._+-]+\.eml")
_FIELD = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)
_WORDS = tuple(Placeholder)
_BLOCK = re.compile(rb"(?:[!-9;-~]+:[ \t][\x20-\x7e]*\r\n(?:[ \t][\x20-\x7e]*\r\n)*)+")


class MessageFactory:
    """Builds every recipient's message for one (issue, list); see the module docstring."""

    def __init__(
        self,
        rendered: RenderedEmail,
        settings: Settings,
        list_name: str,
        *,
        secret: bytes,
        test: bool | None = None,
        date: dt.datetime | None = None,
        links: Sequence[tuple[Place, str]] = (),
        sample: bool = False,
        test_round: int = 1,
    ) -> None:
        """`links`: what each link slot of `rendered` stands for (render_for_sending's);
        `sample`: the message of no reader (its click tokens name row 0); `test_round`: which
        test of a staging list this is (send/testsend.py): each gets its own Message-IDs."""
        mailing_list = settings.mailing_list(list_name)
        self.issue = rendered.issue_number
        self.list_name = list_name
        self.test = mailing_list.staging if test is None else test
        self._round = test_round
        self._secret = secret
        self._fallback_name = settings.newsletter.greeting_fallback
        self._base_url = settings.newsletter.base_url
        self.web_url = issue_url(self._base_url, rendered.issue_number)
        _check_url(self.web_url, "newsletter.base_url")

        sender_name, self.sender = _parse_mailbox(settings.newsletter.sender, "newsletter.sender")
        self.domain = self.sender.rpartition("@")[2]
        # VERP: with [bounces] return_path each message's envelope sender carries its row's tag.
        self._return_path = ""
        if settings.bounces.return_path:
            _, self._return_path = _parse_mailbox(
                settings.bounces.return_path, "bounces.return_path"
            )
        mailto = settings.newsletter.unsubscribe_email or self.sender
        _, address = _parse_mailbox(mailto, "newsletter.unsubscribe_email")
        self._mailto = quote(address, safe="@")

        subject = rendered.subject.strip(" ")
        check_header_value(subject, "subject (the issue's title)")
        if self.test:
            # In the newsletter's own language: "[TEST] " before a title whose only Latin
            # letters are capitals made SpamAssassin score the test send (SUBJ_ALL_CAPS) and
            # not the real one.
            subject = strings_for(EMAIL, settings.newsletter.language)["test_marker"] + subject
        list_label = mailing_list.name or settings.newsletter.name
        check_header_value(list_label, f"lists.{list_name}.name")
        identity = list_id(mailing_list.id, list_name, self.domain)
        when = date or dt.datetime.now(dt.UTC)

        head = [mailbox_header("From", sender_name, self.sender)]
        middle = [
            unstructured_header("Subject", subject),
            f"Date: {email.utils.format_datetime(when)}\r\n",
        ]
        lists = []
        if settings.newsletter.reply_to:
            name, address = _parse_mailbox(settings.newsletter.reply_to, "newsletter.reply_to")
            lists.append(mailbox_header("Reply-To", name, address))
        lists.append(mailbox_header("List-Id", list_label, identity))
        self._boundary = "=_nl_" + _digest(f"{self.issue}\n{list_name}\n{rendered.html}")[:24]
        tail = ["List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"]
        # Gmail's feedback loop groups complaints by these fields (campaign:list:type:sender).
        feedback_list = re.sub(r"[^A-Za-z0-9._-]", "-", list_name)
        tail.append(f"Feedback-ID: {self.issue}:{feedback_list}:newsletter:{self.domain}\r\n")
        if self.test:
            tail.append(f"{TEST_HEADER}: yes\r\n")
        tail.append("MIME-Version: 1.0\r\n")
        language = settings.newsletter.language
        if re.fullmatch(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*", language):
            tail.append(f"Content-Language: {language}\r\n")
        tail.append(f'Content-Type: multipart/alternative;\r\n boundary="{self._boundary}"\r\n')
        # One bytes object per header field: a signer canonicalizes these once per issue.
        self._head = [_ascii(field) for field in head]
        self._middle = [_ascii(field) for field in middle]
        self._lists = [_ascii(field) for field in lists]
        self._tail = [_ascii(field) for field in tail]

        self._text = _split(rendered.text, "text", len(links))
        self._html = _split(rendered.html, "html", len(links))
        # Tracked links: when every message gets the same (aggregate, a sample), filled here.
        self._clicks = ClickLinks(secret, self.issue, links, self._base_url) if links else None
        same = self._clicks and self._clicks.for_every_message(
            settings.tracking.clicks, list_name, sample=sample
        )
        if same:
            self._text = fold_links(*self._text, [url.encode() for url in same])
            self._html = fold_links(*self._html, [html.escape(url).encode() for url in same])
            self._clicks = None
        elif self._clicks is not None:
            clicks = self._clicks
            self._row_tokens = clicks.row_bytes
            self._fixed_rows = MAX_BLOCK_ROW if clicks.token_length is not None else -1
            self._text = clicks.prefixed(*self._text, clicks.prefix_text), self._text[1]
            self._html = clicks.prefixed(*self._html, clicks.prefix_html), self._html[1]
        self._text_pick, self._html_pick = _picker(self._text[1]), _picker(self._html[1])
        text_fixed = self._fixed_lengths(self._text[1])
        html_fixed = self._fixed_lengths(self._html[1])
        self.text_encoder = choose_encoder(self._text[0], text_fixed)
        self.html_encoder = choose_encoder(self._html[0], html_fixed)
        self._text_head = part_head("text/plain", self.text_encoder.name, self._boundary)
        self._html_head = part_head("text/html", self.html_encoder.name, self._boundary)
        self._close = _ascii(f"--{self._boundary}--\r\n")
        self._signing = self._issue_signer(settings)
        # The header block is checked line by line per message (_check_header_block) and the part
        # heads are ours: the encoders decide whether the body lines are ready for SMTP as built.
        self._smtp_ready = self.text_encoder.smtp_ready and self.html_encoder.smtp_ready
        self._fields = [
            b"From",
            b"To",
            b"Subject",
            b"Date",
            b"Message-ID",
            *_FIELD.findall(b"".join(self._lists)),
            b"List-Unsubscribe",
            *_FIELD.findall(b"".join(self._tail)),
        ]
        self._fields[:0] = [b"DKIM-Signature"] * len(self._signing.signers if self._signing else [])
        at = self._fields.index(b"Message-ID") + 1
        self._echo = settings.webhooks.relay
        echo_field = echo_header(self._echo, "").partition(":")[0]
        tags = [TAG_HEADER.encode(), *([echo_field.encode()] if echo_field else [])]
        self._tagged_fields = [*self._fields[:at], *tags, *self._fields[at:]]

    def message_id(self, subscriber: Subscriber) -> str:
        """Unique per (issue, list, recipient), the same on every retry, and unguessable."""
        return self.message_id_of(subscriber.envelope)

    def message_id_of(self, envelope: str) -> str:
        """The Message-ID of the recipient at `envelope` (planning has no Subscriber, and
        stores it with the row). Keyed with NEWSLETTER_SECRET: the issue number is public and
        the list name guessable, so an unkeyed hash of them would let anyone compute every
        reader's Message-ID and quote it in a forged bounce."""
        seed = "\n".join([str(self.issue), self.list_name, fold_address(envelope)]).encode()
        if self._round > 1:
            # A repeated test is a new message: Gmail drops one whose Message-ID it has seen.
            seed += f"\ntest {self._round}".encode()
        mac = hmac.digest(self._secret, _MESSAGE_ID_LABEL + seed, "sha256")
        return f"<{mac[:16].hex()}@{self.domain}>"

    def unsubscribe_url(self, subscriber: Subscriber) -> str:
        """The one-click (RFC 8058) and visible unsubscribe link; the token signs list + address."""
        return unsubscribe_url(self._base_url, self.token(subscriber))

    def token(self, subscriber: Subscriber) -> str:
        return sign(self._secret, self.list_name, fold_address(subscriber.envelope))

    def build(
        self, subscriber: Subscriber, message_id: str | None = None, row_id: int | None = None
    ) -> OutgoingMessage:
        """The finished message for one subscriber, under `message_id` when its outbox row
        already holds one (a retry or a resend); UnsafeHeaderError if a value could inject.
        With [bounces] return_path and the outbox row's id, the envelope sender and the
        X-Newsletter-Tag header carry the row's signed tag (VERP)."""
        name = subscriber.name
        problem = header_problem(name) or header_problem(subscriber.envelope)
        if problem is not None or not subscriber.envelope.isascii():
            where = f"line {subscriber.line}" if subscriber.line is not None else "subscriber"
            raise UnsafeHeaderError(
                f"{where} ({subscriber.envelope!r}): name or address "
                f"{problem or 'is not ASCII (use the punycode envelope form)'}"
            )
        token = self.token(subscriber)
        unsubscribe = unsubscribe_url(self._base_url, token)
        if message_id is None:
            message_id = self.message_id(subscriber)
        elif not _PLAIN_ID.fullmatch(message_id):
            raise UnsafeHeaderError(f"stored Message-ID {message_id!r} is not a plain <id@domain>")
        shown = name or self._fallback_name
        values = Placeholder.values(name=shown, unsubscribe_url=unsubscribe, web_url=self.web_url)
        words = [values[word] for word in _WORDS]
        tokens: Sequence[bytes] = ()
        fixed = False
        if self._clicks is not None:
            row = row_id or PROBE_ROW
            fixed = row <= self._fixed_rows
            tokens = self._row_tokens(row)  # base64url: nothing to escape
        # Every value once, words then tokens; each part picks its slots' in one call.
        text_all = [word.encode() for word in words]
        html_all = [html.escape(word).encode() for word in words]
        text_all += tokens
        html_all += tokens
        text_values, html_values = self._text_pick(text_all), self._html_pick(html_all)
        mailto = f"mailto:{self._mailto}?subject=unsubscribe%20{token}"
        sender = self._return_path or self.sender
        tag_line = b""
        if (self._return_path or self._echo) and row_id is not None:
            tag = make_tag(self._secret, row_id)
            if self._return_path:
                sender = return_path(self._return_path, tag)
            # A relay's webhook events tie back to the row by the tag it echoes (webhooks/).
            echo = echo_header(self._echo, tag)
            tag_line = _ascii(f"{TAG_HEADER}: {tag}\r\n" + (f"{echo}\r\n" if echo else ""))
        fields = [
            *self._head,
            _ascii(mailbox_header("To", name, subscriber.envelope)),
            *self._middle,
            _ascii(f"Message-ID: {message_id}\r\n"),
            *([tag_line] if tag_line else []),
            *self._lists,
            _ascii(f"List-Unsubscribe: <{unsubscribe}>,\r\n <{mailto}>\r\n"),
            *self._tail,
        ]
        header = b"".join(fields)
        if self._signing is None:
            text_lines = self.text_encoder.encode(text_values, fixed=fixed)
            html_lines = self.html_encoder.encode(html_values, fixed=fixed)
        else:
            text_lines, text_relaxed = self.text_encoder.encode_relaxed(text_values, fixed=fixed)
            html_lines, html_relaxed = self.html_encoder.encode_relaxed(html_values, fixed=fixed)
        body = [self._text_head, *text_lines, self._html_head, *html_lines, self._close]
        data = b"".join([header, CRLF, *body])
        if self._signing is not None:
            relaxed: bytes | memoryview
            if text_relaxed is text_lines and html_relaxed is html_lines:
                # Lines that are their own relaxed form (base64), between our part heads and
                # boundaries (relaxed too, _issue_signer checks): the body is its relaxed form.
                relaxed = memoryview(data)[len(header) + 2 :]
            else:
                relaxed = b"".join(
                    [self._text_head, *text_relaxed, self._html_head, *html_relaxed, self._close]
                )
            signature = self._signing.sign(fields, relaxed)
            header = signature + header
            data = signature + data
        self._check_header_block(header, subscriber, tagged=bool(tag_line))
        return OutgoingMessage(
            message_id=message_id,
            sender=sender,
            recipient=subscriber.envelope,
            data=data,
            smtp_ready=self._smtp_ready,
        )

    def _fixed_lengths(self, slots: list[Slot]) -> dict[int, int]:
        """The slots whose bytes have one length in every message: the web version's, and the
        per-reader click URLs (the encoder takes runs of them at once)."""
        found: dict[int, int] = {}
        length = self._clicks.token_length if self._clicks is not None else None
        web = {len(self.web_url.encode()), len(html.escape(self.web_url).encode())}
        for n, slot in enumerate(slots):
            if isinstance(slot, int) and length is not None:
                found[n] = length
            elif slot is Placeholder.WEB_URL and len(web) == 1:
                found[n] = len(self.web_url.encode())
        return found

    def _issue_signer(self, settings: Settings) -> IssueSigner | None:
        """The DKIM signers [dkim] asks for, with this issue's fixed header fields and the
        body's leading lines (the key files are read only then)."""
        if settings.dkim is None:
            return None
        from newsletter.mail.signing import DkimSigner, IssueSigner

        ours = (self._text_head, self._html_head, self._close)
        if any(relaxed_lines(lines) != lines for lines in ours):
            raise AssertionError("a part head or boundary is not in DKIM's relaxed form")
        fixed = [*self._head, *self._middle, *self._lists, *self._tail]
        leading = self._text_head + self.text_encoder.leading
        return IssueSigner(DkimSigner.from_settings(settings), fixed, leading)

    def _check_header_block(self, block: bytes, subscriber: Subscriber, *, tagged: bool) -> None:
        """The last gate: exactly the header fields we wrote, printable ASCII, CRLF, short lines."""
        lines = block.split(CRLF)
        # The name of each line that does not continue a folded one (a multiline _FIELD
        # search costs twice as much); _BLOCK then vouches that every line is one or the other.
        fields = [line.partition(b":")[0] for line in lines if line and line[0] not in b" \t"]
        long_line = max(map(len, lines)) > MAX_LINE
        expected = self._tagged_fields if tagged else self._fields
        if not _BLOCK.fullmatch(block) or fields != expected or long_line:
            raise UnsafeHeaderError(
                f"the header block for {subscriber.envelope!r} is malformed "
                f"(fields {[f.decode('ascii', 'replace') for f in fields]}); nothing was sent"
            )


def sample_message(
    rendered: RenderedEmail,
    settings: Settings,
    list_name: str,
    links: Sequence[tuple[Place, str]] = (),
) -> tuple[OutgoingMessage, bool]:
    """The sample recipient's message (`build`, `check`, the preview), and whether its
    unsubscribe link is signed with a throwaway key because NEWSLETTER_SECRET is unset.
    `links`: what the link slots of `rendered` stand for (render_for_sending's)."""
    key = signing_key(settings, allow_ephemeral=True)
    factory = MessageFactory(
        rendered, settings, list_name, secret=key.secret, links=links, sample=True
    )
    address = settings.newsletter.sample_email
    sample = Subscriber(envelope=address, name=settings.newsletter.sample_name)
    return factory.build(sample), key.ephemeral


def write_eml_files(
    factory: MessageFactory, subscribers: Iterable[Subscriber], out: Path
) -> tuple[int, int]:
    """Write each subscriber's message to `out` as NNNNNN-address.eml (a dry run).

    Files an earlier dry run wrote there (NNNNNN-*.eml) are removed first, so the folder shows
    exactly this run; other files are left alone. Returns (messages written, files removed).
    """
    out.mkdir(parents=True, exist_ok=True)
    removed = 0
    for old in out.glob("*-*.eml"):
        if _EML_NAME.fullmatch(old.name) and old.is_file():
            old.unlink()
            removed += 1
    count = 0
    for count, subscriber in enumerate(subscribers, start=1):
        message = factory.build(subscriber)
        safe = re.sub(r"[^A-Za-z0-9@._+-]", "_", subscriber.envelope)[:100]
        (out / f"{count:06d}-{safe}.eml").write_bytes(message.data)
    return count, removed


# -- placeholders and small helpers ---------------------------------------------------------------


def _split(content: str, part: str, links: int = 0) -> tuple[list[bytes], list[Slot]]:
    """CRLF-normalised UTF-8 bytes between the Placeholder words and the `links` link slots,
    and the slots in order."""
    normal = content.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")
    segments: list[bytes] = []
    slots: list[Slot] = []
    start = 0
    for match in _PLACEHOLDER.finditer(normal):
        word = match.group()
        link = SLOT_WORD.fullmatch(word)
        slot: Slot
        if link is not None and int(link.group(1)) < links:
            slot = int(link.group(1))
        elif word in Placeholder._value2member_map_:
            slot = Placeholder(word)
        else:
            raise TemplateError(
                f"the rendered {part} part contains {word}, which is not a known placeholder",
                hint=f"Use only {', '.join(p.value for p in Placeholder)} in templates.",
            )
        segments.append(normal[start : match.start()].encode())
        slots.append(slot)
        start = match.end()
    segments.append(normal[start:].encode())
    return segments, slots


def _picker(slots: list[Slot]) -> Callable[[Sequence[bytes]], Sequence[bytes]]:
    """What takes a part's values, in its slots' order, from [*words (_WORDS' order), *tokens]
    (a C call, where a lookup per slot is a Python step per link)."""
    where = [
        _WORDS.index(slot) if isinstance(slot, Placeholder) else len(_WORDS) + slot
        for slot in slots
    ]
    if len(where) == 1:
        return lambda values: (values[where[0]],)
    if not where:
        return lambda values: ()
    return operator.itemgetter(*where)


# -- headers -------------------------------------------------------------------------------------


def _check_url(url: str, field: str) -> None:
    if not PRINTABLE.fullmatch(url) or " " in url or '"' in url or "<" in url or ">" in url:
        raise ConfigError(f"{field}: {url!r} must be a plain ASCII URL without spaces or quotes")


def _parse_mailbox(value: str, field: str) -> tuple[str, str]:
    """'Name <a@b>' from the config -> (name, ASCII address); ConfigError if unusable."""
    problem = header_problem(value)
    if problem is not None:
        raise ConfigError(f"{field}: {problem}")
    name, address = email.utils.parseaddr(value)
    try:
        result = validate_email(address, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        raise ConfigError(
            f"{field}: {value!r} is not a usable address: {exc}",
            hint='Write it as "Display Name <name@example.org>".',
        ) from None
    return name, result.ascii_email or result.normalized


def _ascii(text: str) -> bytes:
    return text.encode("ascii")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
