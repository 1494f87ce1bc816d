"""The data every stage passes on: an Issue in; a RenderedEmail, Subscribers, delivery states out.

All models are frozen and forbid unknown fields, so a typo in an issue file is an error, not a
silently ignored key.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

# Filled per reader: refused in an issue's own text (see placeholders.py).
from newsletter.placeholders import PLACEHOLDER_PREFIX as PLACEHOLDER_PREFIX
from newsletter.placeholders import check_placeholders

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


def check_url(value: str) -> str:
    """An absolute http(s) URL with a host and no whitespace; kept exactly as written."""
    check_placeholders(value)
    if any(ch.isspace() for ch in value) or _CONTROL.search(value):
        raise ValueError("must not contain spaces or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an absolute http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("has no host name")
    return value


def check_text(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return check_placeholders(value)


# Python's header code breaks lines on all of these (str.splitlines), not only on CR and LF.
_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENCODED_WORD = re.compile(r"=\?.*\?=", re.DOTALL)


def header_problem(value: str) -> str | None:
    """Why `value` must not go into a mail header (line breaks, controls, `=?..?=`), or None."""
    bad = _HEADER_UNSAFE.search(value)
    if bad:
        code = f"U+{ord(bad.group()):04X}"
        return f"contains the control character {code}, which could inject a mail header"
    if _ENCODED_WORD.search(value):
        return "contains a raw `=?...?=` encoded word, which could inject a mail header"
    return None


# Bidirectional embeddings, overrides and isolates: in a subject they make an inbox show text
# in another order than it is written (the "Trojan Source" trick). Right-to-left text needs none.
BIDI_CONTROLS = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
MAX_SUBJECT_LENGTH = 200


def check_header_text(value: str) -> str:
    problem = header_problem(value)
    if problem is not None:
        raise ValueError(f"becomes the Subject header, and it {problem}")
    bidi = BIDI_CONTROLS.search(value)
    if bidi:
        raise ValueError(
            f"becomes the Subject header, and it contains the bidirectional control "
            f"U+{ord(bidi.group()):04X}, which makes an inbox show it in another order; remove it"
        )
    if len(value) > MAX_SUBJECT_LENGTH:
        raise ValueError(
            f"becomes the Subject header and is {len(value):,} characters long; "
            f"keep it under {MAX_SUBJECT_LENGTH} (inboxes show about 60)"
        )
    return value


Url = Annotated[str, AfterValidator(check_url)]
Text = Annotated[str, StringConstraints(min_length=1), AfterValidator(check_text)]
# The issue's title becomes the Subject header: refused here, so the error names its line.
HeaderText = Annotated[Text, AfterValidator(check_header_text)]


class Link(Frozen):
    label: Text
    url: Url


class Item(Frozen):
    title: Text
    summary: Annotated[str, AfterValidator(check_text)] = ""
    links: list[Link] = Field(default_factory=list)

    @property
    def url(self) -> str | None:
        """The title links to the item's first link."""
        return self.links[0].url if self.links else None


class Section(Frozen):
    title: Text
    items: Annotated[list[Item], Field(min_length=1)]


class Issue(Frozen):
    number: Annotated[int, Field(ge=1)]
    title: HeaderText
    date: dt.date | None = None
    preheader: Annotated[str, AfterValidator(check_text)] = ""
    intro: Annotated[str, AfterValidator(check_text)] = ""
    outro: Annotated[str, AfterValidator(check_text)] = ""
    sections: Annotated[list[Section], Field(min_length=1)]


class Placeholder(StrEnum):
    """Per-recipient values: plain ASCII words that survive MJML, both inliners and `href`."""

    NAME = "__NL_NAME__"
    UNSUBSCRIBE_URL = "__NL_UNSUBSCRIBE_URL__"
    WEB_URL = "__NL_WEB_URL__"

    @staticmethod
    def values(*, name: str, unsubscribe_url: str, web_url: str) -> dict[Placeholder, str]:
        """What each word becomes for one reader (a message) or for no one (the archive)."""
        return {
            Placeholder.NAME: name,
            Placeholder.UNSUBSCRIBE_URL: unsubscribe_url,
            Placeholder.WEB_URL: web_url,
        }


class RenderedEmail(Frozen):
    """One issue rendered once: HTML (CSS inlined) and text, with Placeholder words left to fill."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    issue_number: int
    subject: str
    html: str
    text: str


class Subscriber(Frozen):
    """A valid, normalised recipient.

    `envelope` is the address in ASCII form (punycode domain), used in RCPT TO and in the To
    header, which must be ASCII without SMTPUTF8; `line` is its row in the list, for messages.
    """

    envelope: str
    name: str = ""
    line: int | None = None


class DeliveryStatus(StrEnum):
    """The per-recipient states of the delivery log (see README, "Delivery states")."""

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    FAILED = "failed"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


class OutgoingMessage(BaseModel):
    """One recipient's message as it goes on the wire: envelope plus the finished bytes.

    Built by mail/message.py, sent by send/smtp.py, recorded in the outbox under `message_id`
    (stable across retries, so a resend can be de-duplicated by mailbox providers).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str
    sender: str
    recipient: str
    data: bytes
    # Set only by a builder that wrote every line itself (MessageFactory): each line ends in CRLF
    # and none starts with ".", so the transport sends the bytes after DATA as they are instead
    # of scanning the whole message to check line ends and dot-stuff.
    smtp_ready: bool = False
